'use strict'

// A stand-in for the original @logdna/exclusive-lock, which is not on the registry here. It
// sends exactly the Redis commands of logdna/exclusive-lock-node v2.0.0 (commit 62ee91f,
// lib/exclusive-lock.js), in the same order, through an ioredis client (the original takes the
// user's ioredis-like client as `cache_connection`):
//   acquire: SET <key> <lock_contents> PX <lock_ttl_ms> NX; on 'OK' a setInterval(refresh,
//            lock_refresh_ms) starts (not unref'd, as in the original)
//   refresh: PEXPIRE <key> <lock_ttl_ms>, skipped while the previous one is in flight; the
//            reply is ignored; a rejected PEXPIRE emits 'error' and releases
//   release: clearInterval, then DEL <key> (unconditional: no owner check)
// Key: `<slug(key_prefix)>:<slug(name)>` with key_prefix 'exclusive-lock', each run of
// [\s\W] replaced by '-'; value: lock_contents, default '1'. The per-call JS of the original
// is kept too (state flags, the 'acquired' / 'released' events); its constructor's ajv
// validation runs once per instance and is left out. Written for this bench, not the
// original's code. One instance per key (per worker when contended), reused, as for ours.
const { EventEmitter } = require('node:events')
const { connect } = require('../lib/redis')
const { sleep } = require('../lib/util')

const SLUG = /[\s\W]+/g

/** One lock object with the original's state and command sequence. */
class StandInExclusiveLock extends EventEmitter {
  constructor(client, { name, lockTtlMs = 3000, lockRefreshMs = 1000, lockContents = '1', keyPrefix = 'exclusive-lock' }) {
    super()
    this.client = client
    this.name = name.replace(SLUG, '-')
    this.key = `${keyPrefix.replace(SLUG, '-')}:${this.name}`
    this.lockTtlMs = lockTtlMs
    this.lockRefreshMs = lockRefreshMs
    this.lockContents = lockContents
    this.acquired = false
    this.refreshing = false
    this.timer = null
  }

  async acquire() {
    if (this.acquired) return true // the original warns and sends nothing
    const reply = await this.client.set(this.key, this.lockContents, 'PX', this.lockTtlMs, 'NX')
    if (reply) {
      this.acquired = true
      this.timer = setInterval(() => this.refresh(), this.lockRefreshMs)
      this.emit('acquired', this.key)
    }
    return this.acquired
  }

  refresh() {
    if (this.refreshing) return
    this.refreshing = true
    this.client
      .pexpire(this.key, this.lockTtlMs)
      .then(() => this.emit('refreshed', { key: this.key, lock_ttl_ms: this.lockTtlMs }))
      .catch((err) => {
        this.emit('error', err)
        this.release().catch((e) => this.emit('error', e))
      })
      .finally(() => {
        this.refreshing = false
      })
  }

  async release() {
    if (!this.acquired) return
    clearInterval(this.timer)
    this.timer = null
    try {
      await this.client.del(this.key)
      this.emit('released', this.key)
    } finally {
      this.acquired = false
    }
  }
}

/** The refresh period the bench gives ours (ours-exclusive-lock.js), so both refresh alike. */
function refreshFor(ttlMs) {
  return Math.max(1, Math.min(Math.floor(ttlMs / 3), ttlMs - 500))
}

module.exports = {
  name: 'original: @logdna/exclusive-lock (stand-in)',
  holds: true, // scenario (e): hold(key, ttlMs, refreshMs) keeps a lock alive on its own
  kind: 'original',
  package: 'ioredis',
  async create({ port }) {
    const client = await connect(port)
    const instances = new Map()
    let lost = 0
    const make = (name, ttlMs, refreshMs) => {
      const lock = new StandInExclusiveLock(client, { name, lockTtlMs: ttlMs, lockRefreshMs: refreshMs })
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
      /** The original has no waiting acquire: polled every 10 ms, as for ours. */
      async waitAcquire(key, ttlMs, worker) {
        const lock = instance(`${key}\0${worker}`, key, ttlMs)
        const deadline = Date.now() + 10_000
        while (!(await lock.acquire())) {
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${key}`)
          await sleep(10)
        }
        return lock
      },
      /** A held lock refreshed by its own setInterval (PEXPIRE every refreshMs), scenario (e). */
      async hold(key, ttlMs, refreshMs) {
        const lock = make(key, ttlMs, refreshMs)
        return (await lock.acquire()) ? lock : null
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

module.exports.StandInExclusiveLock = StandInExclusiveLock
module.exports.refreshFor = refreshFor
