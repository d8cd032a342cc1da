'use strict'

// Ours, through the @lilith/distributed-lock API: DistributedLock.acquire / handle.release,
// waitForLock(key, 10000) when contended (polls every retryDelayMs = 10 ms, as the peers do).
const { requireOurs } = require('../lib/util')

module.exports = {
  name: 'ours: DistributedLock',
  kind: 'ours',
  package: 'native-redis-lock',
  async create({ url }) {
    const { DistributedLock } = requireOurs('')
    const lock = new DistributedLock(url, { keyPrefix: 'lock:', retryDelayMs: 10 })
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
      close: async () => {},
    }
  },
}
