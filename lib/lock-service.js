'use strict'

const { randomUUID } = require('node:crypto')
const { NativeLockService, NativeTicker, validateTtlMs, validateFenceRetentionMs } = require('./native')
const { connectionOptions, connectionError, expected: expectedConnection } = require('./connection')
const { sharedAlike, sharedWith } = require('./shared-connection')
// An array of servers is a Redlock over them (docs/plans/redlock.md).
const REDLOCK = { redlock: true }
const { fromNative, invalidArgument, LockLostError } = require('./errors')
const check = require('./validate')
const { heartbeat, KeepAlive, Beating } = require('./liveness')
const { completions, listen, unlisten } = require('./completions')
const { statsOf } = require('./stats')
const { tracerOf, checkTracing } = require('./tracing')

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

const CACHE_METHODS = ['setIfNotExists', 'get', 'del', 'expire']
const CACHE_EXPECTED =
  'cacheInstance must be a cache with setIfNotExists, get, del and expire, a Redis client (ioredis, node-redis, maestro RedisCacheClient), a redis://, rediss://, unix:// or memory:// URL, or options naming host, port, path or url'

/**
 * maestro logs through its logger service (`logDebug`, `logInfo`, `logWarning`, `logError`);
 * `options.logger` may be that, or any logger with `debug`, `info`, `warn`, `error`.
 */
function loggerOf(logger) {
  const level = (maestro, plain) => (...args) => {
    const log = logger?.[maestro] ?? logger?.[plain]
    if (typeof log === 'function') log.apply(logger, args)
  }
  const levels = { debug: level('logDebug', 'debug'), info: level('logInfo', 'info'), warn: level('logWarning', 'warn'), error: level('logError', 'error') }
  // pino, told apart by its bindings(), takes an event's fields first (lib/tracing.js).
  if (typeof logger?.bindings === 'function') levels.bindings = () => logger.bindings()
  return levels
}

/** maestro's backoff: after the n-th failed attempt, min(base x 2^n, cap), plus 0-5 % jitter. */
const backoff = (n) => Math.floor(Math.min(CONFIG.retryDelayMs * 2 ** n, CONFIG.maxBackoffMs) * (1 + Math.random() * 0.05))

const isCache = (cache) => CACHE_METHODS.some((name) => typeof cache[name] === 'function')

/**
 * Where a cache instance's locks go: `{ connection }` when we can read its Redis connection
 * (a client, maestro's RedisCacheClient, a URL, connection options) and take the native path;
 * `null` for any other cache object, which is driven through its own methods.
 */
function pathOf(cache) {
  // A URL alone (the usual way to make one per job) is read by the native side, once.
  if (typeof cache === 'string' && cache.length > 0) return { url: true }
  const client = cache?._client ?? cache?.client
  if (client && typeof client === 'object' && typeof client.sendCommand === 'function') {
    return connectionOptions(client, 'cacheInstance')
  }
  if (cache !== null && typeof cache === 'object' && !Array.isArray(cache) && isCache(cache) && typeof cache.sendCommand !== 'function') {
    return null
  }
  try {
    return connectionOptions(cache, 'cacheInstance', REDLOCK)
  } catch (err) {
    if (err.argument?.startsWith('cacheInstance.') || err.argument?.startsWith('cacheInstance[')) throw err
    // What was wrong with it, as connectionOptions said after its own list of the forms.
    const prefix = expectedConnection('cacheInstance')
    const detail = err.message.startsWith(prefix) ? err.message.slice(prefix.length) : ''
    throw invalidArgument(TypeError, 'cacheInstance', CACHE_EXPECTED + detail)
  }
}

/** What `refreshInterval` holds while a hold is refreshed: the period runs natively. */
class NativeRefresh {
  constructor(everyMs) {
    this.everyMs = everyMs
  }
}

/**
 * Drop-in for @jonaskahn/maestro's DistributedLockService. A cache whose Redis connection we
 * can read takes the native path: atomic compare-and-act scripts, millisecond TTLs, a fresh
 * unguessable value per hold, refreshes on the native watchdog. Any other cache is driven
 * through its own `setIfNotExists`, `get`, `del` and `expire`, with maestro's protocol, on a
 * native refresh schedule. The fields maestro's users read or assign are plain properties.
 */
class DistributedLockService {
  // `{ native, connection, settings }`, shared by the services of these settings (the
  // native side names each hold by its listener): holds them alive while this service lives.
  #shared = null
  #native = null
  #ticker = null
  #keepAlive = new KeepAlive()
  #beating = new Beating()
  #generation = 0
  #listener = 0
  #logger
  // The onEvent hook (lib/tracing.js), when given.
  #tracer = null
  #heldSince = 0
  #fenceRetentionMs
  #stats
  #grants
  #quarantineMs
  // The acquisition in flight, if any: `{ cancelled, cancel(), done }`. A release wins over it.
  #attempt = null
  #refreshing = false
  // The held lock's connection dropped and no refresh has confirmed it since (in doubt).
  #suspended = false
  #onSuspended
  #onResumed
  #onLost
  // The cache #native or #ticker was made for.
  #pathCache = null

  constructor(lockKey, ttlMs = CONFIG.ttlMs, cacheInstance = null, options = {}) {
    if (!lockKey || typeof lockKey !== 'string') throw new Error('Lock key must be a non-empty string')
    if (typeof ttlMs !== 'number' || ttlMs <= 0) throw new Error('TTL must be a positive number')
    try {
      validateTtlMs(ttlMs)
    } catch (err) {
      throw fromNative(err, lockKey)
    }
    check.optionalNumber(options?.fenceRetentionMs, 'options.fenceRetentionMs')
    if (options?.fenceRetentionMs !== undefined) {
      try {
        validateFenceRetentionMs(options.fenceRetentionMs)
      } catch (err) {
        // Named as the caller wrote it.
        const named = fromNative(err, lockKey)
        named.message = `options.${named.message}`
        named.argument = `options.${named.argument}`
        throw named
      }
    }
    this.#fenceRetentionMs = options?.fenceRetentionMs
    this.#stats = check.optionalBoolean(options?.stats, 'options.stats')
    this.#grants = check.optionalBoolean(options?.crossProcessGrants, 'options.crossProcessGrants')
    this.#quarantineMs = check.optionalWholeMs(options?.restartQuarantineMs, 'options.restartQuarantineMs')
    check.optionalFunction(options?.onSuspended, 'options.onSuspended')
    check.optionalFunction(options?.onResumed, 'options.onResumed')
    check.optionalFunction(options?.onLost, 'options.onLost')
    this.#onSuspended = options?.onSuspended
    this.#onResumed = options?.onResumed
    this.#onLost = options?.onLost
    this.#logger = loggerOf(options?.logger)
    checkTracing(undefined, options?.onEvent, 'options')
    // maestro's logger logs maestro's messages; the events too only when asked (ours), else
    // only a throwing onEvent hook, so that a maestro user's logs stay as they were.
    const logEvents = check.optionalBoolean(options?.logEvents, 'options.logEvents') === true && options?.logger != null
    this.#tracer = tracerOf('DistributedLockService', this.#logger, options?.onEvent, logEvents)
    this.lockKey = lockKey
    this.ttl = ttlMs
    this.lockValue = randomUUID()
    this.refreshInterval = null
    this.isLocked = false
    this.cacheLayer = cacheInstance
    // Checked now, so a cache we cannot use is a clear error before any call.
    this.#pathFor(cacheInstance)
  }

  /**
   * The way to `cache` (the native lock, or the ticker that schedules refreshes through the
   * cache's own methods), made when first needed and again when the user assigned another
   * `cacheLayer`, as maestro reads `cacheLayer` at every call.
   */
  #pathFor(cache) {
    if (!cache || cache === this.#pathCache) return
    const native = pathOf(cache)
    this.#pathCache = cache
    this.#native = null
    this.#ticker = null
    if (native === null) {
      // A maestro cache's calls go through its own methods: no connection of ours learns
      // the server's incarnation, so the option would be silently ignored.
      if (this.#quarantineMs) {
        throw invalidArgument(
          TypeError,
          'options.restartQuarantineMs',
          'options.restartQuarantineMs is not supported with a maestro cache (its calls go through the cache, which cannot tell a restart); pass a Redis URL or client, or set it to 0',
        )
      }
      this.#ticker = new NativeTicker(completions)
      return
    }
    try {
      const own = { crossProcessGrants: this.#grants, restartQuarantineMs: this.#quarantineMs }
      const connection = sharedWith(native.url ? cache : undefined, native.url ? undefined : native.connection, own)
      const settings = {
        retryDelayMs: CONFIG.retryDelayMs,
        maxBackoffMs: CONFIG.maxBackoffMs,
        // The original's JS interval stopped with a blocked event loop; a native refresh
        // must not keep a stuck process's lock forever either.
        maxStallMs: 3 * this.ttl,
        fenceRetentionMs: this.#fenceRetentionMs,
        stats: this.#stats,
      }
      const make = () => ({
        native: new NativeLockService(connection, settings, heartbeat),
        connection,
        settings,
      })
      // A traced service has its own (its hook alone hears what the native side sees).
      this.#shared = this.#tracer === null ? sharedAlike(connection, 'lock-service', '', settings, make) : make()
      this.#native = this.#shared.native
      this.#tracer?.observe(this.#native, this)
    } catch (err) {
      const named = fromNative(err, this.lockKey)
      if (named.argument === 'restartQuarantineMs') {
        // Refused natively (a Redlock, a Cluster) under the core's name; users wrote `options.x`.
        named.message = `options.${named.message}`
        named.argument = 'options.restartQuarantineMs'
      }
      throw connectionError(named, native.url ? connectionOptions(cache, 'cacheInstance', REDLOCK) : native)
    }
  }

  /** Resolves `true` once held; `false` after `maxWaitTime` or on a cache error (logged). */
  async acquire(lockTtl, maxWaitTime) {
    check.optionalNumber(lockTtl ?? undefined, 'lockTtl')
    check.optionalNumber(maxWaitTime ?? undefined, 'maxWaitTime')
    if (!this.cacheLayer) {
      // maestro's words, in its order: no cache, a failed attempt, a timeout.
      this.#logger.warn('No cache instance provided, distributed locking disabled')
      this.#logger.error(`Lock acquisition error for ${this.lockKey}`, new Error('No cache layer available for lock operations'))
      this.#logger.warn(`Failed to acquire lock: ${this.lockKey} (timeout)`)
      return false
    }
    if (this.isLocked) return true
    try {
      this.#pathFor(this.cacheLayer)
    } catch (err) {
      this.#logger.error(`Lock acquisition error for ${this.lockKey}`, err)
      return false
    }
    const attempt = this.#startAttempt()
    const started = this.#tracer === null ? 0 : performance.now()
    try {
      const won = this.#native ? await this.#acquireNative(attempt, lockTtl, maxWaitTime) : await this.#acquireThroughCache(attempt, lockTtl, maxWaitTime)
      if (won) {
        this.#holding(lockTtl)
        this.#heldSince = Date.now()
        this.#tracer?.acquired(this.lockKey, undefined, started)
        this.#logger.debug(`Lock acquired successfully: ${this.lockKey}`)
      } else if (!attempt.cancelled) {
        this.#logger.warn(`Failed to acquire lock: ${this.lockKey} (timeout)`)
      }
      return won
    } finally {
      if (this.#attempt === attempt) this.#attempt = null
      attempt.finish()
    }
  }

  /** `true` when released or already gone, `false` when another holder has it or on error. */
  async release() {
    if (!this.isLocked) {
      // An acquisition in flight ends released: the caller of release() wins.
      const attempt = this.#attempt
      if (attempt) {
        attempt.cancel()
        await attempt.done
      }
      return true
    }
    if (!this.cacheLayer) {
      // As maestro: nothing to release without a cache.
      this.#logger.warn('No cache instance provided, distributed locking disabled')
      this.#stopRefresh()
      this.isLocked = false
      this.#logger.debug(`Lock released: ${this.lockKey}`)
      return true
    }
    return this.#native ? this.#releaseNative() : this.#releaseThroughCache()
  }

  /**
   * What this object's calls have done since it was made over a connection of ours (a cache object of another kind counts nothing; with every object of the same
   * connection and settings, which share its native side): see README "Stats".
   */
  stats() {
    return statsOf(this.#native)
  }

  /** Releases, then disconnects the cache instance as the original does. */
  async disconnect() {
    await this.release().catch((error) => this.#logger.warn(`Error releasing lock during disconnect: ${this.lockKey}`, error))
    this.#stopRefresh()
    this.isLocked = false
    if (this.cacheLayer && typeof this.cacheLayer.disconnect === 'function') {
      await this.cacheLayer.disconnect()
    }
    this.#logger.info(`Distributed lock disconnected: ${this.lockKey}`)
  }

  /**
   * Not in the original: true from the moment the held lock's connection to Redis dropped
   * until a refresh confirms it (then `options.onResumed`) or finds it gone (lost).
   */
  get suspended() {
    return this.#suspended
  }

  getStatus() {
    return {
      lockKey: this.lockKey,
      lockValue: this.lockValue,
      ttl: this.ttl,
      isLocked: this.isLocked,
      hasAutoRefresh: Boolean(this.refreshInterval),
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

  #startAttempt() {
    let finish
    const attempt = {
      cancelled: false,
      done: new Promise((resolve) => (finish = resolve)),
      finish: () => finish(),
      // Cuts a backoff sleep short (set while one runs).
      wake: null,
      // The native acquisition's listener, once it is made.
      listener: 0,
      cancel: () => {
        attempt.cancelled = true
        attempt.wake?.()
        if (attempt.listener !== 0) this.#native?.cancel(attempt.listener)
      },
    }
    this.#attempt = attempt
    return attempt
  }

  /** A hold started: refreshed, and keeping the process alive as maestro's interval did. */
  #holding(lockTtl) {
    this.isLocked = true
    this.#keepAlive.set(true)
    const every = Math.max(1, Math.floor(Math.min(this.ttl, lockTtl ?? this.ttl) / 3))
    this.refreshInterval = new NativeRefresh(every)
    if (this.#ticker) {
      const generation = this.#generation
      this.#listener = listen((event) => event === 'tick' && generation === this.#generation && this.#refreshThroughCache(lockTtl))
      this.#ticker.start(this.#listener, every)
    } else this.#beating.set(true)
  }

  #stopRefresh() {
    this.#generation++
    this.#suspended = false
    this.#ticker?.stop()
    unlisten(this.#listener)
    this.#listener = 0
    this.refreshInterval = null
    this.#keepAlive.set(false)
    this.#beating.set(false)
  }

  async #acquireNative(attempt, lockTtl, maxWaitTime) {
    if (this.#listener !== 0) {
      // A hold its user ended by setting isLocked false, refreshed until its next refresh
      // is told: stopped now, as maestro's next acquisition clears the old interval.
      this.#native.forget(this.#listener)
      this.#stopRefresh()
    }
    const generation = ++this.#generation
    this.#suspended = false
    const listener = listen((event, code, message) => {
      if (generation !== this.#generation) return
      if (event === 'suspended' || event === 'resumed') {
        if (this.#suspended === (event === 'suspended')) return
        this.#suspended = !this.#suspended
        this.#logger.warn(`Lock ${event}: ${this.lockKey}`)
        this.#tracer?.doubt(this.lockKey, undefined, this.#suspended)
        if (this.#suspended) this.#onSuspended?.(this)
        else this.#onResumed?.(this)
        return
      }
      if (event === 'refreshed') {
        // maestro's refresh stops once its user set isLocked false by hand: the lock is then
        // left to expire (release() of an unlocked service deletes nothing).
        if (!this.isLocked) {
          this.#stopRefresh()
          this.#native?.forget(listener)
        } else this.#tracer?.refreshed(this.lockKey, undefined, lockTtl ?? this.ttl)
        return
      }
      if (event !== 'lost') return
      this.isLocked = false
      this.#stopRefresh()
      const error = new LockLostError(this.lockKey, message)
      this.#tracer?.lost(this.lockKey, undefined, error)
      this.#logger.warn(`Lock lost: ${this.lockKey} (${message})`)
      this.#onLost?.(this, error)
    })
    attempt.listener = listener
    let token
    try {
      token = await this.#native.acquire(this.lockKey, this.ttl, lockTtl, maxWaitTime, listener)
    } catch (err) {
      unlisten(listener)
      const error = fromNative(err, this.lockKey)
      if (error.code === 'EINVAL') throw error
      this.#tracer?.error(this.lockKey, error, 'acquire')
      this.#logger.error(`Lock acquisition error for ${this.lockKey}`, error)
      return false
    }
    if (token === null) {
      unlisten(listener)
      return false
    }
    if (attempt.cancelled) {
      // Won as release() was called: the release wins.
      unlisten(listener)
      await this.#native.release(listener).catch((err) => this.#logger.error(`Lock release error for ${this.lockKey}`, fromNative(err, this.lockKey)))
      return false
    }
    this.lockValue = token
    this.#listener = listener
    return true
  }

  async #releaseNative() {
    const listener = this.#listener
    this.#stopRefresh()
    this.isLocked = false
    try {
      const released = await this.#native.release(listener)
      if (released) this.#tracer?.released(this.lockKey, undefined, Date.now() - this.#heldSince)
      if (released) this.#logger.debug(`Lock released: ${this.lockKey}`)
      else this.#logger.warn(`Failed to release lock: ${this.lockKey} (not lock owner)`)
      return released
    } catch (err) {
      const error = fromNative(err, this.lockKey)
      this.#tracer?.error(this.lockKey, error, 'release')
      this.#logger.error(`Lock release error for ${this.lockKey}`, error)
      return false
    }
  }

  // The generic path: maestro's protocol, through the cache object's own methods.

  async #ensureCacheInitialized() {
    const cache = this.cacheLayer
    if (!cache.isConnected && cache.connect) {
      await cache.connect()
      this.#logger.info(`Distributed lock initialized with cache: ${this.lockKey}`)
    }
  }

  async #acquireThroughCache(attempt, lockTtl, maxWaitTime) {
    await this.#ensureCacheInitialized()
    const ttl = lockTtl ?? this.ttl
    const deadline = performance.now() + (maxWaitTime ?? ttl * 3)
    for (let count = 1; !attempt.cancelled; count++) {
      let won
      try {
        won = await this.cacheLayer.setIfNotExists(this.lockKey, this.lockValue, ttl)
      } catch (error) {
        this.#logger.error(`Lock acquisition error for ${this.lockKey}`, error)
        return false
      }
      if (won && attempt.cancelled) {
        await this.#deleteIfOurs().catch((error) => this.#logger.error(`Lock release error for ${this.lockKey}`, error))
        return false
      }
      if (won) {
        this.#logger.debug(`Lock acquired: ${this.lockKey} (attempt ${count})`)
        return true
      }
      const left = deadline - performance.now()
      if (left <= 0) return false
      this.#logger.debug(`Lock acquisition attempt ${count} failed, retrying...`)
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, Math.min(backoff(count), left))
        attempt.wake = () => {
          clearTimeout(timer)
          resolve()
        }
      })
      attempt.wake = null
    }
    return false
  }

  async #refreshThroughCache(lockTtl) {
    if (!this.isLocked) return this.#stopRefresh()
    if (this.#refreshing) return
    this.#refreshing = true
    const generation = this.#generation
    try {
      const current = await this.cacheLayer.get(this.lockKey)
      if (generation !== this.#generation) return
      if (current === this.lockValue) {
        await this.cacheLayer.expire(this.lockKey, Math.max(this.ttl, lockTtl ?? this.ttl))
        this.#logger.debug(`Lock refreshed: ${this.lockKey}`)
      } else {
        this.#logger.warn(`Lock lost: ${this.lockKey}`)
        this.isLocked = false
        this.#stopRefresh()
        this.#onLost?.(this, new LockLostError(this.lockKey, 'the lock was found gone or taken at a refresh'))
      }
    } catch (error) {
      this.#logger.error(`Lock refresh error for ${this.lockKey}`, error)
    } finally {
      this.#refreshing = false
    }
  }

  /** maestro's release: GET, then DEL when it is still our value. */
  async #deleteIfOurs() {
    const current = await this.cacheLayer.get(this.lockKey)
    if (current === this.lockValue) {
      await this.cacheLayer.del(this.lockKey)
      return true
    }
    return !current
  }

  async #releaseThroughCache() {
    let released
    try {
      await this.#ensureCacheInitialized()
      released = await this.#deleteIfOurs()
    } catch (error) {
      this.#logger.error(`Lock release error for ${this.lockKey}`, error)
      released = false
    }
    this.#stopRefresh()
    this.isLocked = false
    if (released) this.#logger.debug(`Lock released: ${this.lockKey}`)
    else this.#logger.warn(`Failed to release lock: ${this.lockKey} (not lock owner)`)
    return released
  }
}

module.exports = { DistributedLockService, CONFIG }
