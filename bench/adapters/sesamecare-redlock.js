'use strict'

// @sesamecare-oss/redlock (the TypeScript node-redlock fork for ioredis 5).
const { Redlock } = require('@sesamecare-oss/redlock')
const { connect } = require('../lib/redis')

const WAIT = { retryCount: -1, retryDelay: 10, retryJitter: 5 }

module.exports = {
  name: '@sesamecare-oss/redlock',
  kind: 'peer',
  package: '@sesamecare-oss/redlock',
  async create({ port }) {
    const client = await connect(port)
    const redlock = new Redlock([client], { retryCount: 0, retryJitter: 0 })
    redlock.on('error', () => {}) // it emits ResourceLockedError on every lost vote
    return {
      async acquire(key, ttlMs) {
        try {
          return await redlock.acquire([key], ttlMs)
        } catch {
          return null
        }
      },
      release: (lock) => redlock.release(lock),
      waitAcquire: (key, ttlMs) => redlock.acquire([key], ttlMs, WAIT),
      close: () => client.quit(),
    }
  },
}
