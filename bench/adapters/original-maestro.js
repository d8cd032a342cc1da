'use strict'

// A stand-in for the original DistributedLockService of @jonaskahn/maestro, which is not on the
// registry here. It sends exactly the Redis commands of jonaskahn/maestro v0.0.7 (commit
// 960f28e, src/services/distributed-lock-service.js over the RedisCacheClient of
// src/implementations/cache/redis-cache-client.js), in the same order. The original talks to
// Redis through node-redis v4; this stand-in sends the same commands through ioredis, as every
// JS row of the bench does:
//   acquire: SET <lockKey> <lockValue> EX <ceil(ttl / 1000)> NX, 'OK' = won; on a miss it
//            sleeps floor(min(retryDelayMs * 2^attempt, maxBackoffMs) * (1 + random * 0.05))
//            and tries again until maxWaitTime (default 3 x ttl) has passed; once won, a
//            setInterval(refresh, floor(constructor ttl / 3)) starts
//   refresh: GET <lockKey>; equal to lockValue -> EXPIRE <lockKey> <ceil(constructor ttl / 1000)>;
//            otherwise the lock is lost (the timer stops)
//   release: GET <lockKey>; equal to lockValue -> DEL <lockKey> (two commands, not atomic);
//            the timer stops in any case
// Key: the lockKey as given (no prefix); value: `<Date.now()>-<Math.random() base 36, chars
// 2..14>`, fixed per instance. retryDelayMs and maxBackoffMs come from the same environment
// variables as the original (MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS, default 30000, and
// MO_BACKOFF_MAX_DELAY_MS, default 18000; the bench sets both to 10). The original's debug
// logging is a no-op unless enabled and is left out. Written for this bench, not the
// original's code. One instance per key (per worker when contended), reused, as for ours.
process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS ??= '10'
process.env.MO_BACKOFF_MAX_DELAY_MS ??= '10'
const { connect } = require('../lib/redis')

const RETRY_DELAY_MS = Number(process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS) || 30_000
const MAX_BACKOFF_MS = Number(process.env.MO_BACKOFF_MAX_DELAY_MS) || 18_000

/** One lock object with the original's state and command sequence. */
class StandInLockService {
  constructor(client, lockKey, ttlMs, onLost) {
    this.client = client
    this.lockKey = lockKey
    this.ttl = ttlMs
    this.lockValue = `${Date.now()}-${Math.random().toString(36).substring(2, 15)}`
    this.refreshInterval = null
    this.isLocked = false
    this.onLost = onLost
  }

  async acquire(lockTtl, maxWaitTime) {
    const ttl = lockTtl ?? this.ttl
    const maxWait = maxWaitTime ?? ttl * 3
    const start = Date.now()
    let attempt = 0
    while (Date.now() - start < maxWait) {
      attempt++
      const reply = await this.client.set(this.lockKey, this.lockValue, 'EX', Math.ceil(ttl / 1000), 'NX')
      if (reply === 'OK') {
        this.isLocked = true
        this.startRefresh()
        return true
      }
      const delay = Math.floor(Math.min(RETRY_DELAY_MS * 2 ** attempt, MAX_BACKOFF_MS) * (1 + (Math.random() * 5) / 100))
      await new Promise((resolve) => setTimeout(resolve, delay))
    }
    return false
  }

  startRefresh() {
    if (this.refreshInterval) clearInterval(this.refreshInterval)
    this.refreshInterval = setInterval(() => this.refresh(), Math.floor(this.ttl / 3))
  }

  stopRefresh() {
    if (this.refreshInterval) {
      clearInterval(this.refreshInterval)
      this.refreshInterval = null
    }
  }

  async refresh() {
    try {
      if (!this.isLocked) return this.stopRefresh()
      if ((await this.client.get(this.lockKey)) === this.lockValue) {
        await this.client.expire(this.lockKey, Math.ceil(this.ttl / 1000))
      } else {
        this.isLocked = false
        this.stopRefresh()
        this.onLost()
      }
    } catch {
      // the original logs and swallows refresh errors
    }
  }

  async release() {
    if (!this.isLocked) return true
    let ok
    try {
      const current = await this.client.get(this.lockKey)
      if (current === this.lockValue) {
        await this.client.del(this.lockKey)
        ok = true
      } else {
        ok = !current // gone already: true; someone else's: false
      }
    } catch {
      ok = false
    }
    this.stopRefresh()
    this.isLocked = false
    return ok
  }
}

module.exports = {
  name: 'original: maestro DistributedLockService (stand-in)',
  holds: true, // scenario (e): hold(key, ttlMs, refreshMs) keeps a lock alive on its own
  kind: 'original',
  package: 'ioredis',
  async create({ port }) {
    const client = await connect(port)
    const instances = new Map()
    let lost = 0
    const onLost = () => {
      lost++
    }
    const instance = (id, key, ttlMs) => {
      let lock = instances.get(id)
      if (!lock) {
        lock = new StandInLockService(client, key, ttlMs, onLost)
        instances.set(id, lock)
      }
      return lock
    }
    return {
      // acquire(ttl) with the default wait (3 x ttl), as maestro's producer calls it: on a free
      // key that is one SET. (The original's acquire(ttl, 0) sends nothing and returns false.)
      async acquire(key, ttlMs) {
        const lock = instance(key, key, ttlMs)
        return (await lock.acquire(ttlMs)) ? lock : null
      },
      release: (lock) => lock.release(),
      async waitAcquire(key, ttlMs, worker) {
        const lock = instance(`${key}\0${worker}`, key, ttlMs)
        if (!(await lock.acquire(ttlMs, 10_000))) throw new Error(`timed out waiting for ${key}`)
        return lock
      },
      /** A held lock refreshed by its own setInterval every third of its TTL (scenario e). */
      async hold(key, ttlMs) {
        const lock = new StandInLockService(client, key, ttlMs, onLost)
        return (await lock.acquire(ttlMs)) ? lock : null
      },
      get lost() {
        return lost
      },
      async close() {
        await Promise.all([...instances.values()].map((lock) => lock.release()))
        await client.quit()
      },
    }
  },
}

module.exports.StandInLockService = StandInLockService
