'use strict'

// The stand-in of @logdna/exclusive-lock (original-exclusive-lock.js) with a new object for
// every acquisition on the one shared ioredis client, as its users pass their client. Its
// constructor's ajv validation is left out, as in the stand-in. (a) and (b) only.
const { connect } = require('../lib/redis')
const { StandInExclusiveLock, refreshFor } = require('./original-exclusive-lock')

module.exports = {
  name: 'original: @logdna/exclusive-lock (stand-in), one per acquisition',
  kind: 'original',
  package: 'ioredis',
  scenarios: ['a', 'b'],
  async create({ port }) {
    const client = await connect(port)
    return {
      async acquire(key, ttlMs) {
        const lock = new StandInExclusiveLock(client, { name: key, lockTtlMs: ttlMs, lockRefreshMs: refreshFor(ttlMs) })
        lock.on('error', () => {})
        return (await lock.acquire()) ? lock : null
      },
      release: (lock) => lock.release(),
      close: () => client.quit(),
    }
  },
}
