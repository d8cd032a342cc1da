'use strict'

// Ours, through the @logdna/exclusive-lock API. An ExclusiveLock is bound to one name and
// refreshes itself while held (native watchdog), so every acquire also registers the lock
// with the watchdog and every release removes it. One instance per key (per worker when
// contended), created once and reused, as a service would. Its acquire is a single attempt,
// so the contended scenario polls it every 10 ms, as a user of the original would.
const { requireOurs, sleep } = require('../lib/util')

function refreshFor(ttlMs) {
  return Math.max(1, Math.min(Math.floor(ttlMs / 3), ttlMs - 500))
}

module.exports = {
  name: 'ours: ExclusiveLock',
  holds: true, // scenario (e): hold(key, ttlMs, refreshMs) keeps a lock alive on its own
  kind: 'ours',
  package: 'native-redis-lock',
  async create({ url }) {
    const ExclusiveLock = requireOurs('exclusive-lock')
    const instances = new Map()
    let lost = 0
    const make = (name, ttlMs, refreshMs) => {
      const lock = new ExclusiveLock({ name, cache_connection: url, lock_ttl_ms: ttlMs, lock_refresh_ms: refreshMs })
      lock.on('error', () => {
        lost++
      })
      return lock
    }
    const instance = (id, name, ttlMs) => {
      let lock = instances.get(id)
      if (!lock) {
        lock = make(name, ttlMs, refreshFor(ttlMs))
        instances.set(id, lock)
      }
      return lock
    }
    return {
      async acquire(key, ttlMs) {
        const lock = instance(key, key, ttlMs)
        return (await lock.acquire()) ? lock : null
      },
      release: (lock) => lock.release(),
      async waitAcquire(key, ttlMs, worker) {
        const lock = instance(`${key}\0${worker}`, key, ttlMs)
        const deadline = Date.now() + 10_000
        while (!(await lock.acquire())) {
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${key}`)
          await sleep(10)
        }
        return lock
      },
      /** A held lock refreshed by the native watchdog (scenario e). */
      async hold(key, ttlMs, refreshMs) {
        const lock = make(key, ttlMs, refreshMs)
        return (await lock.acquire()) ? lock : null
      },
      get lost() {
        return lost
      },
      async close() {
        await Promise.all([...instances.values()].map((lock) => lock.release()))
      },
    }
  },
}
