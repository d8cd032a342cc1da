'use strict'

// Ours, through maestro's DistributedLockService API: acquire(ttl, maxWait) -> boolean,
// release(). It refreshes itself while held (native watchdog), and waits with maestro's
// exponential backoff; the bench sets MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS=10 and
// MO_BACKOFF_MAX_DELAY_MS=10 (a flat 10 ms poll, like the peers) before loading it.
// One instance per key (per worker when contended), created once and reused.
process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS ??= '10'
process.env.MO_BACKOFF_MAX_DELAY_MS ??= '10'
const { requireOurs } = require('../lib/util')

module.exports = {
  name: 'ours: DistributedLockService',
  holds: true, // scenario (e): hold(key, ttlMs, refreshMs) keeps a lock alive on its own
  kind: 'ours',
  package: 'native-redis-lock',
  async create({ url }) {
    const DistributedLockService = requireOurs('maestro')
    const instances = new Map()
    let lost = 0
    const noop = () => {}
    // The service tells of a lost lock through its logger only.
    const logger = { info: noop, debug: noop, error: noop, warn: (m) => String(m).startsWith('Lock lost') && lost++ }
    const instance = (id, key, ttlMs) => {
      let lock = instances.get(id)
      if (!lock) {
        lock = new DistributedLockService(key, ttlMs, url)
        instances.set(id, lock)
      }
      return lock
    }
    return {
      async acquire(key, ttlMs) {
        const lock = instance(key, key, ttlMs)
        return (await lock.acquire(ttlMs, 0)) ? lock : null
      },
      release: (lock) => lock.release(),
      async waitAcquire(key, ttlMs, worker) {
        const lock = instance(`${key}\0${worker}`, key, ttlMs)
        if (!(await lock.acquire(ttlMs, 10_000))) throw new Error(`timed out waiting for ${key}`)
        return lock
      },
      /** A held lock refreshed by the native watchdog every third of its TTL (scenario e). */
      async hold(key, ttlMs) {
        const lock = new DistributedLockService(key, ttlMs, url, { logger })
        return (await lock.acquire(ttlMs, 0)) ? lock : null
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
