'use strict'

// Ours, DistributedLock with an onEvent hook (which counts what it hears) and stats() read
// every 100 acquisitions, beside the plain DistributedLock row in (a) and (b): what tracing
// costs when used. The counters themselves are on (src/core/basics/stats.rs) in both rows
// (ours-distributed-lock-nostats.js has them off); a traced lock has its own native lock, as any lock with a hook does.
const { variant } = require('./ours-distributed-lock')

let events = 0
const traced = variant('ours: DistributedLock (onEvent + stats)', {
  onEvent: () => {
    events++
  },
})

module.exports = {
  ...traced,
  holds: false,
  scenarios: ['a', 'b'],
  async create(options) {
    const made = await traced.create(options)
    const acquire = made.acquire
    let calls = 0
    made.acquire = (key, ttlMs) => {
      if (++calls % 100 === 0) made.stats()
      return acquire(key, ttlMs)
    }
    return made
  },
  /** How many events the hook heard (the row would measure nothing if it heard none). */
  get events() {
    return events
  },
}
