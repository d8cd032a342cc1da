'use strict'

// Ours, through the @logdna/exclusive-lock API, with a new ExclusiveLock for every acquisition
// (code that makes one per job, as `new ExclusiveLock({ name, cache_connection })` invites):
// what construction costs on top of acquire + release. (a) and (b) only.
const { requireOurs } = require('../lib/util')
const { refreshFor } = require('./original-exclusive-lock')

module.exports = {
  name: 'ours: ExclusiveLock, one per acquisition',
  kind: 'ours',
  package: 'native-redis-lock',
  scenarios: ['a', 'b'],
  async create({ url }) {
    const ExclusiveLock = requireOurs('exclusive-lock')
    return {
      async acquire(key, ttlMs) {
        const lock = new ExclusiveLock({ name: key, cache_connection: url, lock_ttl_ms: ttlMs, lock_refresh_ms: refreshFor(ttlMs) })
        return (await lock.acquire()) ? lock : null
      },
      release: (lock) => lock.release(),
      close: async () => {},
    }
  },
}
