'use strict'

// Ours, through maestro's DistributedLockService API, with a new service for every
// acquisition: what construction costs on top of acquire + release. (a) and (b) only.
process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS ??= '10'
process.env.MO_BACKOFF_MAX_DELAY_MS ??= '10'
const { requireOurs } = require('../lib/util')

module.exports = {
  name: 'ours: DistributedLockService, one per acquisition',
  kind: 'ours',
  package: 'native-redis-lock',
  scenarios: ['a', 'b'],
  async create({ url }) {
    const DistributedLockService = requireOurs('maestro')
    return {
      async acquire(key, ttlMs) {
        const lock = new DistributedLockService(key, ttlMs, url)
        return (await lock.acquire(ttlMs, 0)) ? lock : null
      },
      release: (lock) => lock.release(),
      close: async () => {},
    }
  },
}
