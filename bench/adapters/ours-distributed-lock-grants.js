'use strict'

// Ours, DistributedLock made with `crossProcessGrants: true` (issue 26): a release gives the
// lock to the next waiting process, which holds it with no attempt of its own. Only the
// processes of (c4) and (c16) wait across processes; its native lock is not shared with the default
// row's (its connection differs).
const { variant } = require('./ours-distributed-lock')

module.exports = {
  ...variant('ours: DistributedLock (crossProcessGrants)', { crossProcessGrants: true }),
  holds: false,
  scenarios: ['c4', 'c16'],
}
