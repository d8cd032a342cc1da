'use strict'

// Ours, DistributedLock made with `stats: false`, beside the plain DistributedLock row in (a)
// and (b): what the counters behind stats(), on by default, cost (issue 27). Its native lock
// is not shared with the default row's: its settings differ.
const { variant } = require('./ours-distributed-lock')

module.exports = {
  ...variant('ours: DistributedLock (stats: false)', { stats: false }),
  holds: false,
  scenarios: ['a', 'b'],
}
