'use strict'

// redis-semaphore's Mutex (redis-semaphore.js) with a new Mutex for every acquisition on the
// one shared ioredis client: a peer made per acquisition, the reference for our
// DistributedLock made per acquisition (@lilith/distributed-lock has no stand-in). (a), (b).
const { Mutex } = require('redis-semaphore')
const { connect } = require('../lib/redis')

module.exports = {
  name: 'redis-semaphore, one Mutex per acquisition',
  kind: 'peer-each',
  package: 'redis-semaphore',
  scenarios: ['a', 'b'],
  async create({ port }) {
    const client = await connect(port)
    return {
      async acquire(key, ttlMs) {
        const m = new Mutex(client, key, { lockTimeout: ttlMs, acquireAttemptsLimit: 1, refreshInterval: 0 })
        return (await m.tryAcquire()) ? m : null
      },
      release: (m) => m.release(),
      close: () => client.quit(),
    }
  },
}
