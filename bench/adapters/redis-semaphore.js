'use strict'

// redis-semaphore's Mutex (SET NX PX to acquire, a compare-and-delete script to release).
// A Mutex is bound to one key; as in user code, one instance per key (and per worker when
// several workers contend for one key) is created once and reused.
const { Mutex } = require('redis-semaphore')
const { connect } = require('../lib/redis')

module.exports = {
  name: 'redis-semaphore',
  holds: true, // scenario (e): hold(key, ttlMs, refreshMs) keeps a lock alive on its own
  kind: 'peer',
  package: 'redis-semaphore',
  async create({ port }) {
    const client = await connect(port)
    const once = new Map()
    const waiting = new Map()
    let lost = 0
    const onLockLost = () => {
      lost++
    }
    return {
      async acquire(key, ttlMs) {
        let m = once.get(key)
        if (!m) {
          m = new Mutex(client, key, { lockTimeout: ttlMs, acquireAttemptsLimit: 1, refreshInterval: 0, onLockLost })
          once.set(key, m)
        }
        return (await m.tryAcquire()) ? m : null
      },
      release: (m) => m.release(),
      async waitAcquire(key, ttlMs, worker) {
        const id = `${key}\0${worker}`
        let m = waiting.get(id)
        if (!m) {
          m = new Mutex(client, key, { lockTimeout: ttlMs, acquireTimeout: 10_000, retryInterval: 10, refreshInterval: 0, onLockLost })
          waiting.set(id, m)
        }
        await m.acquire()
        return m
      },
      /** A held lock refreshed by the library's own timer (scenario e). */
      async hold(key, ttlMs, refreshMs) {
        const m = new Mutex(client, key, { lockTimeout: ttlMs, refreshInterval: refreshMs, acquireAttemptsLimit: 1, onLockLost })
        return (await m.tryAcquire()) ? m : null
      },
      get lost() {
        return lost
      },
      close: () => client.quit(),
    }
  },
}
