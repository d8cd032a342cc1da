'use strict'

// Ours, through the @lilith/distributed-lock API, with a new DistributedLock for every
// acquisition: what construction costs on top of acquire + release (the original's source is
// not public, so there is no stand-in; compared with one DistributedLock reused). (a) and (b).
const { requireOurs } = require('../lib/util')

module.exports = {
  name: 'ours: DistributedLock, one per acquisition',
  kind: 'ours',
  package: 'native-redis-lock',
  scenarios: ['a', 'b'],
  async create({ url }) {
    const { DistributedLock } = requireOurs('')
    return {
      async acquire(key, ttlMs) {
        const lock = new DistributedLock(url, { keyPrefix: 'lock:', retryDelayMs: 10 })
        try {
          return await lock.acquire(key, ttlMs)
        } catch (err) {
          if (err.code === 'ELOCKED') return null
          throw err
        }
      },
      release: (handle) => handle.release(),
      close: async () => {},
    }
  },
}
