'use strict'

// redlock-universal's single-instance lock: createLock({ adapter: new IoredisAdapter(client),
// key, ttl }) -> acquire() -> handle, release(handle). A lock object is bound to one key; one
// is created per key (per worker when contended) and reused.
const { createLock, IoredisAdapter } = require('redlock-universal')
const { connect } = require('../lib/redis')
const { holdThroughUsing } = require('../lib/util')

module.exports = {
  name: 'redlock-universal',
  holds: true, // scenario (e): hold(key, ttlMs, refreshMs) keeps a lock alive on its own
  kind: 'peer',
  package: 'redlock-universal',
  async create({ port }) {
    const client = await connect(port)
    const adapter = new IoredisAdapter(client)
    const once = new Map()
    const waiting = new Map()
    let lost = 0
    const onLost = () => {
      lost++
    }
    return {
      async acquire(key, ttlMs) {
        let lock = once.get(key)
        if (!lock) {
          lock = createLock({ adapter, key, ttl: ttlMs, retryAttempts: 0 })
          once.set(key, lock)
        }
        try {
          return { lock, handle: await lock.acquire() }
        } catch {
          return null
        }
      },
      release: ({ lock, handle }) => lock.release(handle),
      async waitAcquire(key, ttlMs, worker) {
        const id = `${key}\0${worker}`
        let lock = waiting.get(id)
        if (!lock) {
          lock = createLock({ adapter, key, ttl: ttlMs, retryAttempts: 1000, retryDelay: 10 })
          waiting.set(id, lock)
        }
        return { lock, handle: await lock.acquire() }
      },
      /** A held lock, extended by `using()` once ttl - refresh of it is used (scenario e). */
      hold(key, ttlMs, refreshMs) {
        const lock = createLock({ adapter, key, ttl: ttlMs, retryAttempts: 0, extensionThresholdRatio: 1 - refreshMs / ttlMs })
        return holdThroughUsing((routine) => lock.using(routine), onLost)
      },
      releaseHeld: (held) => held.release(),
      get lost() {
        return lost
      },
      close: () => client.quit(),
    }
  },
}
