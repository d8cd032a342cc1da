'use strict'

const { randomUUID } = require('node:crypto')
const { NativeLockService, validateTtlMs } = require('./native')
const { connectionOptions } = require('./connection')
const { fromNative } = require('./errors')
const { heartbeat, KeepAlive, Beating } = require('./liveness')
const { completions, listen, unlisten } = require('./completions')

// maestro's TtlConfig, read once at load as maestro does: a set variable that is not a
// non-negative integer falls back to the computed default.
function envMs(name, fallback) {
  const text = process.env[name]
  if (text) {
    const value = parseInt(text, 10)
    if (!Number.isNaN(value) && value >= 0) return value
  }
  return fallback
}
const baseTtl = envMs('MO_TASK_PROCESSING_BASE_TTL_MS', 30_000)
const retryBase = envMs('MO_RETRY_BASE_INTERVAL_MS', 3_000)
const CONFIG = Object.freeze({
  ttlMs: envMs('MO_DISTRIBUTED_LOCK_TTL_MS', baseTtl * 2),
  retryDelayMs: envMs('MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS', baseTtl),
  maxBackoffMs: envMs('MO_BACKOFF_MAX_DELAY_MS', retryBase * 6),
})

const noop = () => {}
const SILENT = Object.freeze({ info: noop, warn: noop, error: noop, debug: noop })

/** maestro's own Redis cache client keeps a node-redis client in `_client`. */
function connectionOf(cache) {
  const client = cache._client ?? cache.client
  if (client && typeof client === 'object' && typeof client.sendCommand === 'function') {
    return connectionOptions(client)
  }
  const options = cache.config?.connectionOptions
  if (options && typeof cache.setIfNotExists === 'function') {
    return connectionOptions({ url: options.url ?? process.env.MO_REDIS_URL, password: options.password })
  }
  try {
    return connectionOptions(cache)
  } catch {
    throw new TypeError(
      'cacheInstance must be a Redis client (ioredis, node-redis, maestro RedisCacheClient), a redis:// URL or { host, port }',
    )
  }
}

/**
 * Drop-in for @jonaskahn/maestro's DistributedLockService, with its safety fixed: atomic
 * compare-and-act scripts, millisecond TTLs, an unguessable lock value, and a refresh that
 * runs on the native watchdog.
 */
class DistributedLockService {
  #native = null
  #keepAlive = new KeepAlive()
  #beating = new Beating()
  #generation = 0
  #listener
  #logger
  #initialValue

  constructor(lockKey, ttlMs = CONFIG.ttlMs, cacheInstance = null, options = {}) {
    if (!lockKey || typeof lockKey !== 'string') throw new Error('Lock key must be a non-empty string')
    if (typeof ttlMs !== 'number' || ttlMs <= 0) throw new Error('TTL must be a positive number')
    try {
      validateTtlMs(ttlMs)
    } catch (err) {
      throw fromNative(err, lockKey)
    }
    this.#logger = options?.logger ?? SILENT
    this.lockKey = lockKey
    this.ttl = ttlMs
    this.cacheLayer = cacheInstance
    if (cacheInstance !== null && cacheInstance !== undefined) {
      const { connection } = connectionOf(cacheInstance)
      try {
        this.#native = new NativeLockService(
          connection,
          {
            lockKey,
            ttlMs,
            retryDelayMs: CONFIG.retryDelayMs,
            maxBackoffMs: CONFIG.maxBackoffMs,
            // The original's JS interval stopped with a blocked event loop; a native refresh
            // must not keep a stuck process's lock forever either.
            maxStallMs: 3 * ttlMs,
          },
          heartbeat,
          completions,
        )
      } catch (err) {
        throw fromNative(err, lockKey)
      }
    }
    this.#initialValue = randomUUID()
  }

  /** The value our lock holds in Redis: the current hold's token, else the last one's. */
  get lockValue() {
    return this.#native?.lockValue ?? this.#initialValue
  }

  get isLocked() {
    return this.#native?.isLocked ?? false
  }

  /** Resolves `true` once held; `false` after `maxWaitTime` or on a Redis error (logged). */
  async acquire(lockTtl, maxWaitTime) {
    if (!this.#native) {
      this.#logger.warn('No cache instance provided, distributed locking disabled')
      return false
    }
    if (this.isLocked) return true
    const generation = ++this.#generation
    unlisten(this.#listener)
    const listener = listen((event, code, message) => {
      if (event !== 'lost' || generation !== this.#generation) return
      unlisten(listener)
      this.#keepAlive.set(false)
      this.#beating.set(false)
      this.#logger.warn(`Lock lost: ${this.lockKey} (${message})`)
    })
    this.#listener = listener
    try {
      const won = await this.#native.acquire(lockTtl, maxWaitTime, listener)
      if (won) {
        this.#keepAlive.set(true)
        this.#beating.set(true)
        this.#logger.debug(`Lock acquired successfully: ${this.lockKey}`)
      } else {
        this.#logger.warn(`Failed to acquire lock: ${this.lockKey} (timeout)`)
      }
      return won
    } catch (err) {
      const error = fromNative(err, this.lockKey)
      if (error.code === 'EINVAL') throw error
      this.#logger.error(`Lock acquisition error for ${this.lockKey}`, error)
      return false
    }
  }

  /** `true` when released or already gone, `false` when another holder has it or on error. */
  async release() {
    if (!this.#native) return true
    this.#generation++
    unlisten(this.#listener)
    this.#keepAlive.set(false)
    this.#beating.set(false)
    try {
      return await this.#native.release()
    } catch (err) {
      this.#logger.error(`Lock release error for ${this.lockKey}`, fromNative(err, this.lockKey))
      return false
    }
  }

  /** Releases, then disconnects the cache instance as the original does. */
  async disconnect() {
    await this.release()
    if (this.cacheLayer && typeof this.cacheLayer.disconnect === 'function') {
      await this.cacheLayer.disconnect()
    }
    this.#logger.info(`Distributed lock disconnected: ${this.lockKey}`)
  }

  getStatus() {
    return {
      lockKey: this.lockKey,
      lockValue: this.lockValue,
      ttl: this.ttl,
      isLocked: this.isLocked,
      hasAutoRefresh: this.isLocked,
      cacheConnected: this.cacheLayer && this.cacheLayer.isConnected,
      hasCacheLayer: Boolean(this.cacheLayer),
    }
  }

  getLockKey() {
    return this.lockKey
  }

  getLockTtl() {
    return this.ttl
  }
}

module.exports = { DistributedLockService, CONFIG }
