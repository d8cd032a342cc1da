'use strict'

// @sesamecare-oss/redlock (the TypeScript node-redlock fork for ioredis 5).
const { Redlock } = require('@sesamecare-oss/redlock')
const { connect } = require('../lib/redis')
const { holdThroughUsing } = require('../lib/util')

const WAIT = { retryCount: -1, retryDelay: 10, retryJitter: 5 }

module.exports = {
  name: '@sesamecare-oss/redlock',
  holds: true, // scenario (e): hold(key, ttlMs, refreshMs) keeps a lock alive on its own
  kind: 'peer',
  package: '@sesamecare-oss/redlock',
  async create({ port }) {
    const client = await connect(port)
    const redlock = new Redlock([client], { retryCount: 0, retryJitter: 0 })
    redlock.on('error', () => {}) // it emits ResourceLockedError on every lost vote
    let lost = 0
    const onLost = () => {
      lost++
    }
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
      /** A held lock, extended by `using()` when less than ttl - refresh remains (scenario e). */
      hold: (key, ttlMs, refreshMs) =>
        holdThroughUsing(
          (routine) => redlock.using([key], ttlMs, { retryCount: 0, automaticExtensionThreshold: ttlMs - refreshMs }, routine),
          onLost,
        ),
      releaseHeld: (held) => held.release(),
      get lost() {
        return lost
      },
      close: () => client.quit(),
    }
  },
}
