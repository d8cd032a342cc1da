'use strict'

const { NativeDistributedLock, NativeLockHandle } = require('./native')
const { connectionOptions } = require('./connection')
const { withSignal } = require('./abort')
const { fromNative, LockLostError } = require('./errors')
const { heartbeat, Beating } = require('./liveness')
const { completions, call, listen, unlisten } = require('./completions')
const check = require('./validate')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
const CONSTRUCTING = Symbol('LockHandle')

/**
 * The loss notice of an `autoRefresh` hold: created before the native call (which needs its
 * listener id), handed to the LockHandle after. The heartbeat runs from the start of the wait,
 * so a lock won after a long wait is not taken for a stalled one.
 */
class LossNotice {
  #beating = new Beating()
  #resolve
  #onLost

  constructor(key, onLost) {
    this.key = key
    this.#onLost = onLost
    this.promise = new Promise((resolve) => (this.#resolve = resolve))
    this.#beating.set(true)
    this.listener = listen((event, code, message) => {
      if (event !== 'lost') return
      this.stop()
      const err = new LockLostError(key, message)
      this.#resolve(err)
      this.#onLost?.(err)
    })
  }

  stop() {
    this.#beating.set(false)
    unlisten(this.listener)
  }
}

const NEVER = new Promise(() => {})

/** A lock acquired through DistributedLock. */
class LockHandle {
  #native
  #notice

  constructor(native, token, notice) {
    if (token !== CONSTRUCTING || !(native instanceof NativeLockHandle)) {
      throw new TypeError('LockHandle instances are created by DistributedLock, not directly')
    }
    this.#native = native
    this.#notice = notice
  }

  /**
   * For `autoRefresh` holds: resolves with a LockLostError when the watchdog finds the lock
   * gone or cannot confirm it before its TTL runs out. Pending forever otherwise.
   */
  get lost() {
    return this.#notice?.promise ?? NEVER
  }

  get key() {
    return this.#native.key
  }

  get token() {
    return this.#native.token
  }

  /** Fencing token: strictly increasing per lock key, 15-digit zero-padded decimal. */
  get fence() {
    return this.#native.fence
  }

  /** Local state: not released and not past its TTL by our (conservative) monotonic clock. */
  get isHeld() {
    return this.#native.isHeld
  }

  get info() {
    const n = this.#native
    return {
      key: n.key,
      token: n.token,
      acquiredAt: n.acquiredAt,
      expiresAt: n.expiresAt,
      isHeld: n.isHeld,
      fence: n.fence,
    }
  }

  async release() {
    this.#notice?.stop()
    try {
      await call((id) => this.#native.release(id))
    } catch (err) {
      throw fromNative(err, this.#native.key)
    }
  }

  async extend(additionalMs) {
    check.number(additionalMs, 'additionalMs')
    try {
      await call((id) => this.#native.extend(id, additionalMs))
    } catch (err) {
      throw fromNative(err, this.#native.key)
    }
  }

  async [asyncDispose]() {
    await this.release()
  }
}

function wrap(native, notice) {
  if (native) return new LockHandle(native, CONSTRUCTING, notice)
  notice?.stop()
  return null
}

/** Reads `{ autoRefresh, onLost }`; a LossNotice when the hold is to be kept alive. */
function lossNotice(key, o) {
  check.optionalBoolean(o.autoRefresh, 'options.autoRefresh')
  check.optionalFunction(o.onLost, 'options.onLost')
  return o.autoRefresh ? new LossNotice(key, o.onLost) : undefined
}

/** Drop-in for @lilith/distributed-lock's DistributedLock. */
class DistributedLock {
  #native

  constructor(redis, options) {
    const { connection, clientKeyPrefix } = connectionOptions(redis)
    const o = check.optionalObject(options, 'options')
    check.optionalString(o.keyPrefix, 'options.keyPrefix')
    for (const name of ['defaultTtlMs', 'retryDelayMs', 'maxRetries', 'connectTimeoutMs', 'commandTimeoutMs']) {
      check.optionalNumber(o[name], `options.${name}`)
    }
    try {
      this.#native = new NativeDistributedLock(
        { ...connection, connectTimeoutMs: o.connectTimeoutMs },
        {
          keyPrefix: o.keyPrefix,
          clientKeyPrefix,
          defaultTtlMs: o.defaultTtlMs,
          retryDelayMs: o.retryDelayMs,
          maxRetries: o.maxRetries,
          commandTimeoutMs: o.commandTimeoutMs,
        },
        heartbeat,
        completions,
      )
    } catch (err) {
      throw withOptionPrefix(fromNative(err))
    }
  }

  /** Acquires `key`, retrying `maxRetries` times with exponential backoff. */
  async acquire(key, ttlMs, options) {
    check.string(key, 'key')
    check.optionalNumber(ttlMs, 'ttlMs')
    const o = check.optionalObject(options, 'options')
    const signal = check.optionalSignal(o.signal, 'options.signal')
    return this.#acquiring(key, signal, lossNotice(key, o), (cancel, listener) =>
      call((id) => this.#native.acquire(id, key, ttlMs, cancel, listener)),
    )
  }

  /** One attempt; `null` when someone else holds the lock. */
  async tryAcquire(key, ttlMs, options) {
    check.string(key, 'key')
    check.optionalNumber(ttlMs, 'ttlMs')
    const notice = lossNotice(key, check.optionalObject(options, 'options'))
    try {
      const native = await call((id) => this.#native.tryAcquire(id, key, ttlMs, notice?.listener))
      return wrap(native, notice)
    } catch (err) {
      notice?.stop()
      throw fromNative(err, key)
    }
  }

  /** Waits up to `timeoutMs` for the lock, however many attempts that takes. */
  async waitForLock(key, timeoutMs, ttlMs, options) {
    check.string(key, 'key')
    check.number(timeoutMs, 'timeoutMs')
    check.optionalNumber(ttlMs, 'ttlMs')
    const o = check.optionalObject(options, 'options')
    const signal = check.optionalSignal(o.signal, 'options.signal')
    return this.#acquiring(key, signal, lossNotice(key, o), (cancel, listener) =>
      call((id) => this.#native.waitForLock(id, key, timeoutMs, ttlMs, cancel, listener)),
    )
  }

  /** Whether anyone holds `key`. Rejects, never answers `false`, when Redis cannot be asked. */
  async isLocked(key) {
    check.string(key, 'key')
    try {
      return await call((id) => this.#native.isLocked(id, key))
    } catch (err) {
      throw fromNative(err, key)
    }
  }

  /**
   * Acquires `key` (waiting up to `timeoutMs` when given, else as `acquire`), runs
   * `fn(handle)`, and releases in `finally`. Resolves with what `fn` returns.
   */
  async using(key, fn, options) {
    check.string(key, 'key')
    if (typeof fn !== 'function') check.optionalFunction(fn ?? null, 'fn')
    const o = check.optionalObject(options, 'options')
    const acquireOptions = { signal: o.signal, autoRefresh: o.autoRefresh, onLost: o.onLost }
    const handle =
      o.timeoutMs === undefined
        ? await this.acquire(key, o.ttlMs, acquireOptions)
        : await this.waitForLock(key, o.timeoutMs, o.ttlMs, acquireOptions)
    let result
    try {
      result = await fn(handle)
    } catch (err) {
      // The work's own failure is the one to report; the lock expires by TTL if this fails.
      await handle.release().catch(() => {})
      throw err
    }
    await handle.release()
    return result
  }

  async #acquiring(key, signal, notice, start) {
    try {
      const handle = await withSignal(signal, (cancel) =>
        start(cancel, notice?.listener).then((native) => wrap(native, notice)),
      )
      if (signal?.aborted) {
        // Won in the instant after the caller gave up: hand it back rather than out.
        await handle.release().catch(() => {})
        throw signal.reason
      }
      return handle
    } catch (err) {
      notice?.stop()
      throw fromNative(err, key)
    }
  }

  /**
   * Writes `value` to the hash at `key` unless a write with a higher fencing token already
   * landed there: the fenced store that makes a paused, expired holder's late write harmless.
   * Resolves `true` when written, `false` when rejected as stale.
   */
  async fencedSet(key, value, fence) {
    check.string(key, 'key')
    check.string(value, 'value')
    check.string(fence, 'fence')
    try {
      return await call((id) => this.#native.fencedSet(id, key, value, fence))
    } catch (err) {
      throw fromNative(err, key)
    }
  }
}

// The core names options as the native layer receives them; users wrote `options.x`.
function withOptionPrefix(err) {
  const names = ['defaultTtlMs', 'retryDelayMs', 'maxRetries', 'connectTimeoutMs', 'commandTimeoutMs']
  if (err.code === 'EINVAL' && names.includes(err.argument)) {
    err.message = `options.${err.message}`
    err.argument = `options.${err.argument}`
  }
  return err
}

module.exports = { DistributedLock, LockHandle }
