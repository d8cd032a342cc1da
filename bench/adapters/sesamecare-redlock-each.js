'use strict'

// @sesamecare-oss/redlock (sesamecare-redlock.js) with a new Redlock for every acquisition on
// the one shared ioredis client: a lock manager made per acquisition, as a DistributedLock
// is, the reference for ours made per acquisition (@lilith/distributed-lock has no
// stand-in). (a) and (b) only.
const { Redlock } = require('@sesamecare-oss/redlock')
const { connect } = require('../lib/redis')

module.exports = {
  name: '@sesamecare-oss/redlock, one Redlock per acquisition',
  kind: 'peer-each',
  package: '@sesamecare-oss/redlock',
  scenarios: ['a', 'b'],
  async create({ port }) {
    const client = await connect(port)
    return {
      async acquire(key, ttlMs) {
        const redlock = new Redlock([client], { retryCount: 0, retryJitter: 0 })
        redlock.on('error', () => {})
        try {
          return { redlock, lock: await redlock.acquire([key], ttlMs) }
        } catch {
          return null
        }
      },
      release: ({ redlock, lock }) => redlock.release(lock),
      close: () => client.quit(),
    }
  },
}
