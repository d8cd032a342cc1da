'use strict'

// Ours, through the @lilith/distributed-lock API: DistributedLock.acquire / handle.release,
// waitForLock(key, 10000) when contended (polls every retryDelayMs = 10 ms, as the peers do).
// Held locks (scenario e) are `autoRefresh` handles: the native watchdog refreshes them every
// third of their TTL (the API has no other period), with one onLost callback for all.
const { requireOurs } = require('../lib/util')

/** The adapter for `new DistributedLock(url, options)`, named `name`. */
const variant = (name, options) => ({
  name,
  holds: true, // scenario (e): hold(key, ttlMs, refreshMs) keeps a lock alive on its own
  kind: 'ours',
  package: 'native-redis-lock',
  async create({ url }) {
    const { DistributedLock } = requireOurs('')
    const lock = new DistributedLock(url, { keyPrefix: 'lock:', retryDelayMs: 10, ...options })
    let lost = 0
    const onLost = () => {
      lost++
    }
    return {
      async acquire(key, ttlMs) {
        try {
          return await lock.acquire(key, ttlMs)
        } catch (err) {
          if (err.code === 'ELOCKED') return null
          throw err
        }
      },
      release: (handle) => handle.release(),
      waitAcquire: (key, ttlMs) => lock.waitForLock(key, 10_000, ttlMs),
      /** A held lock refreshed by the native watchdog (scenario e). */
      hold: (key, ttlMs) => lock.tryAcquire(key, ttlMs, { autoRefresh: true, onLost }),
      get lost() {
        return lost
      },
      close: async () => {},
      /** The lock's stats (read by the traced variant). */
      stats: () => lock.stats(),
    }
  },
})

module.exports = variant('ours: DistributedLock', {})
module.exports.variant = variant
