'use strict'

const { NativeDistributedLock } = require('./native')
const { connectionOptions, connectionError } = require('./connection')
const { sharedUrl, sharedAlike, sharedWith } = require('./shared-connection')
// An array of servers is a Redlock over them (docs/plans/redlock.md).
const REDLOCK = { redlock: true }
const { withSignal } = require('./abort')
const { lossSignal } = require('./loss-signal')
const { fromNative, InvalidLockError, LockLostError, LockAcquisitionError } = require('./errors')
const { heartbeat, beating } = require('./liveness')
const { completions, listen, unlisten, EVENT, FAILED } = require('./completions')
const check = require('./validate')
const { statsOf } = require('./stats')
const { tracerOf, checkTracing } = require('./tracing')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
const CONSTRUCTING = Symbol('LockHandle')
/** The listener id a handle's acquisition passes to the native call (0: not `autoRefresh`). */
const LISTENER = Symbol('listener')
/** The acquisition did not win, or ended in an error: no news or beats are wanted. */
const STOP = Symbol('stop')
/** Whether the lock ended without being released: lost, or past its TTL. */
const GONE = Symbol('gone')
/** Resolves when `pending` does, or when `signal` (if any) aborts, whichever comes first. */
function untilAborted(pending, signal) {
  if (signal == null) return pending
  if (signal.aborted) return DONE
  return new Promise((resolve) => {
    const aborted = () => resolve()
    signal.addEventListener('abort', aborted, { once: true })
    pending.then(() => {
      signal.removeEventListener('abort', aborted)
      resolve()
    })
  })
}

/** Resolves once an `autoRefresh` hold is no longer in doubt (see `[DOUBT_ENDED]`). */
const DOUBT_ENDED = Symbol('doubtEnded')
/** Whether the hold's lease still runs, doubt aside (see `[IN_LEASE]`). */
const IN_LEASE = Symbol('inLease')
// Past the last confirmed expiry, the watchdog has reported the loss: a margin for its news.
const DOUBT_MARGIN_MS = 50

let fill

// Handle state bits.
const FILLED = 1 // the acquisition won: the fields below describe a lock
const RELEASED = 2
const RELEASING = 4 // a release is in flight; if it fails, the lock is ours again
const BEATING = 8 // counted among the locks whose holder's event loop is watched
const LOST = 16 // the watchdog gave it up
// Started on its predecessor's lease while the handover was in flight: until Redis answers,
// the deadline is that lease's (see src/core/ops/fast/handoff.rs).
const LENT = 32
const SUSPENDED = 64 // its connection dropped: in doubt until a refresh answers (see `suspended`)

// Wall-clock times arrive from the native side as whole ms after this base: small integers,
// stored in the object itself (a fractional or huge number, or one computed here, would be
// a separate heap object per field, per handle).
const BASE = completions.baseWallMs

/**
 * A lock acquired through DistributedLock. A plain object: it holds its lock's key, token
 * and deadline (on the monotonic clock of `performance.now()`, counted from when the
 * acquiring request was sent, rounded down), and hands them to the native side to release
 * or extend. Kept small: 10,000 held locks are 10,000 of these.
 */
class LockHandle {
  #native
  #key
  // Not kept for a lock the watchdog keeps alive (it has the token) until the watch ends.
  #token = undefined
  #fence = 0
  #deadline = 0
  #acquiredAt = 0
  #expiresAt = 0
  // When the request that last confirmed the lock (its acquisition or an extend) was sent,
  // on the clock of `#deadline`: a drop of its connection since puts a plain hold in doubt.
  #confirmed = 0
  #flags = 0
  // autoRefresh holds only: the watchdog entry, the listener id, `{ onLost, onSuspended,
  // onResumed }`, and the loss (`{ error, promise, resolve }`, made when lost or when `lost`
  // is first read).
  #watch = 0
  #listener = 0
  #told = undefined
  #lost = null
  // Resolvers of `[DOUBT_ENDED]()` calls made while in doubt.
  #doubtEnds = null
  // The lock's logger and onEvent hook (lib/tracing.js), when it has either.
  #tracer = null

  constructor(token, native, key, autoRefresh, tracer = null) {
    if (token !== CONSTRUCTING || !(native instanceof NativeDistributedLock)) {
      throw new TypeError('LockHandle instances are created by DistributedLock, not directly')
    }
    this.#native = native
    this.#key = key
    this.#tracer = tracer
    if (autoRefresh) {
      this.#told = autoRefresh
      this.#listener = listen(this)
      // From the start of the wait: a lock won after a long wait is not a stalled one.
      this.#flags = BEATING
      beating(1)
    }
  }

  static {
    // The native side fills a handle in when its acquisition wins (see lib/completions.js).
    fill = (handle, token, fence, deadline, acquiredAt, expiresAt, watch, lent, confirmed) => {
      handle.#token = token
      handle.#fence = fence
      handle.#deadline = deadline
      handle.#confirmed = confirmed
      handle.#acquiredAt = acquiredAt
      handle.#expiresAt = expiresAt
      handle.#watch = watch
      handle.#flags |= FILLED | (lent ? LENT : 0)
      return handle
    }
  }

  get [LISTENER]() {
    return this.#listener
  }

  [STOP]() {
    this.#stopListening()
  }

  [GONE]() {
    return (this.#flags & RELEASED) === 0 && !this.isHeld
  }

  /**
   * Resolves once this `autoRefresh` hold is no longer in doubt: resumed, lost or released,
   * or, at the latest, just past the expiry Redis last confirmed (the watchdog reports the
   * loss by then). At once when it is not in doubt.
   */
  [DOUBT_ENDED]() {
    if (this.#told === undefined || !this.suspended) return DONE
    return new Promise((resolve) => {
      const bound = Math.max(0, this.#expiresAtNow() - Date.now()) + DOUBT_MARGIN_MS
      // Unref'd: a wait on a doubt never keeps the process alive by itself.
      const timer = setTimeout(resolve, Math.min(bound, 2 ** 31 - 1)).unref()
      ;(this.#doubtEnds ??= []).push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }

  #endDoubt() {
    const ends = this.#doubtEnds
    if (ends === null) return
    this.#doubtEnds = null
    for (const end of ends) end()
  }

  /**
   * For `autoRefresh` holds: resolves with a LockLostError when the watchdog finds the lock
   * gone or cannot confirm it before its TTL runs out. Pending forever otherwise.
   */
  get lost() {
    // Each handle has its own: reactions on a promise shared by every plain handle would be
    // kept for as long as the process runs.
    if (this.#lost === null) {
      const lost = { error: null, promise: null, resolve: null }
      lost.promise = new Promise((resolve) => (lost.resolve = resolve))
      this.#lost = lost
    }
    return this.#lost.promise
  }

  /** The key as locked: a lone surrogate went to Redis (as to ioredis) as U+FFFD. */
  get key() {
    return this.#key.toWellFormed()
  }

  get token() {
    return this.#token ?? (this.#watch !== 0 ? this.#native.watchToken(this.#watch) : undefined) ?? ''
  }

  /** Fencing token: strictly increasing per lock key, 15-digit zero-padded decimal. */
  get fence() {
    return String(this.#fence).padStart(15, '0')
  }

  /**
   * True from the moment its connection to Redis dropped until the lock is confirmed again:
   * for `autoRefresh` holds by a refresh (then `onResumed`, or `onLost` when it is gone), for
   * the others by their own `extend()` (no event: nothing watches them).
   */
  get suspended() {
    if ((this.#flags & (FILLED | RELEASED | LOST)) !== FILLED) return false
    if (this.#told !== undefined) return (this.#flags & SUSPENDED) !== 0
    return this.#native.inDoubt(this.#confirmed)
  }

  /**
   * Local state: not released, not past its TTL by our (conservative) monotonic clock, and
   * not in doubt after a dropped connection (see `suspended`).
   */
  /** Whether the lease runs yet, on the monotonic clock (a wall-clock step changes nothing). */
  [IN_LEASE]() {
    return performance.now() < this.#deadline
  }

  get isHeld() {
    if ((this.#flags & (FILLED | RELEASED | LOST)) !== FILLED) return false
    if (this.#watch !== 0) return this.#native.watchHeld(this.#watch)
    if ((this.#flags & LENT) !== 0) this.#askLent()
    return performance.now() < this.#deadline && !this.#native.inDoubt(this.#confirmed)
  }

  get info() {
    // A lent start confirmed since: its expiry is its own now (see `#askLent`).
    if ((this.#flags & LENT) !== 0) this.#askLent()
    return {
      key: this.key,
      token: this.token,
      acquiredAt: BASE + this.#acquiredAt,
      expiresAt: this.#expiresAtNow(),
      isHeld: this.isHeld,
      fence: this.fence,
    }
  }

  release() {
    if ((this.#flags & (FILLED | RELEASED)) !== FILLED) return DONE
    if ((this.#flags & LENT) !== 0) this.#askLent()
    this.#flags |= RELEASED | RELEASING
    this.#stopListening()
    this.#endDoubt()
    const watch = this.#watch
    this.#remember()
    // A lost lock, or one lent to us and not confirmed yet, is never lent on (fence 0).
    const fence = (this.#flags & (LOST | LENT)) === 0 ? this.#fence : 0
    try {
      const released = callersFrames(this.#native.release(this, this.#key, this.#token ?? '', fence, this.#deadline, watch))
      return this.#tracer === null ? released : this.#traceRelease(released)
    } catch (err) {
      this[FAILED]()
      return Promise.reject(fromNative(err, this.#key))
    }
  }

  #traceRelease(released) {
    const tracer = this.#tracer
    return released.then(
      () => tracer.released(this.key, this.fence, Date.now() - (BASE + this.#acquiredAt)),
      (err) => {
        tracer.error(this.key, err, 'release')
        throw err
      },
    )
  }

  async extend(additionalMs) {
    check.number(additionalMs, 'additionalMs')
    if ((this.#flags & (FILLED | RELEASED)) !== FILLED) throw new InvalidLockError(this.#key)
    let extended
    try {
      extended = await this.#native.extend(this, this.#key, this.token, additionalMs, this.#deadline, this.#watch)
    } catch (err) {
      const error = fromNative(err, this.#key)
      this.#tracer?.error(this.key, error, 'extend')
      throw error
    }
    // The extend went after our handover, if we started on a lent lease: its answer is in.
    if ((this.#flags & LENT) !== 0) this.#askLent()
    // A release that landed while the extend was in flight wins: the lock stays released.
    if ((this.#flags & RELEASED) === 0) {
      this.#deadline = extended[0]
      this.#expiresAt = extended[1]
      this.#confirmed = extended[2]
    }
    this.#tracer?.refreshed(this.key, this.fence, BASE + extended[1] - Date.now())
  }

  async [asyncDispose]() {
    await this.release()
  }

  /**
   * We started on the lease of the release that handed us the lock, before Redis ran the
   * handover: until it answers, our deadline is that lease's; then our own, or none.
   */
  #askLent() {
    const state = this.#native.lentState(this.#token)
    if (state === 0) return
    this.#flags &= ~LENT
    // Confirmed: the lock runs to its own expiry, as much later than the lent one as its
    // deadline is (both rounded down; its own validity is a few ms short of its TTL).
    if (state > 0) this.#expiresAt += state - this.#deadline
    this.#deadline = state < 0 ? 0 : state
  }

  /** A native call made for this handle failed with `code`. */
  [FAILED](code) {
    if (code === 'ENOTHELD') this.#flags |= RELEASED
    else if ((this.#flags & RELEASING) !== 0) {
      // The release may not have happened: the lock is still ours to release again.
      this.#flags &= ~(RELEASING | RELEASED)
    }
  }

  /** News of an `autoRefresh` hold from the watchdog. */
  [EVENT](event, code, message, expiresAt, token) {
    if (this.#lost?.error) return
    if (event === 'suspended' || event === 'resumed') return this.#doubt(event === 'suspended')
    if (event !== 'lost') return
    this.#flags = (this.#flags | LOST) & ~SUSPENDED
    this.#stopListening()
    if (expiresAt !== undefined) {
      this.#token ??= token
      this.#watch = 0
      this.#expiresAt = expiresAt
    } else this.#remember()
    const error = new LockLostError(this.#key, message)
    if (this.#lost === null) {
      this.#lost = { error, promise: Promise.resolve(error), resolve: null }
    } else {
      this.#lost.error = error
      this.#lost.resolve(error)
    }
    this.#tracer?.lost(this.key, this.fence, error)
    this.#endDoubt()
    this.#told.onLost?.(error)
  }

  #doubt(suspended) {
    if ((this.#flags & SUSPENDED) !== 0 === suspended) return
    this.#flags ^= SUSPENDED
    this.#tracer?.doubt(this.key, this.fence, suspended)
    if (!suspended) this.#endDoubt()
    if (suspended) this.#told.onSuspended?.(this)
    else this.#told.onResumed?.(this)
  }

  #stopListening() {
    if (this.#listener === 0) return
    unlisten(this.#listener)
    if ((this.#flags & BEATING) !== 0) {
      this.#flags &= ~BEATING
      beating(-1)
    }
  }

  #expiresAtNow() {
    if (this.#watch === 0) return BASE + this.#expiresAt
    const confirmed = this.#native.watchExpiresAt(this.#watch)
    return BASE + (Number.isNaN(confirmed) ? this.#expiresAt : confirmed)
  }

  /** The watch is ending: keep what it last confirmed, and never ask by its id again. */
  #remember() {
    if (this.#watch === 0) return
    const confirmed = this.#native.watchExpiresAt(this.#watch)
    if (!Number.isNaN(confirmed)) this.#expiresAt = confirmed
    this.#token ??= this.#native.watchToken(this.#watch) ?? undefined
    this.#watch = 0
  }
}

completions.hook('handle', fill)

const DONE = Promise.resolve()

function rethrow(err) {
  throw fromNative(err)
}

/**
 * A native call's promise, whose failure gets a stack with the caller's frames: `rethrow`
 * runs as a reaction whose promise the caller awaits, and V8 adds the frames awaiting that
 * promise to the stack it captures there (see fromNative). A success costs one reaction,
 * where an async function awaiting the call cost one more promise and a resumption.
 * A call answered in place (memory://, src/binding/js/in_call.rs) returned its value, not a
 * promise: it never fails, so it needs no reaction.
 */
function callersFrames(pending) {
  // Told apart by `then`, not `instanceof Promise`: a program that replaces the global
  // Promise (Bluebird) would see our native promises as values.
  return typeof pending?.then === 'function' ? pending.then(undefined, rethrow) : Promise.resolve(pending)
}

/**
 * Reads `{ autoRefresh, onLost, onSuspended, onResumed }`; what a handle needs to be kept
 * alive, if it is to be.
 */
function autoRefreshOf(o) {
  check.optionalBoolean(o.autoRefresh, 'options.autoRefresh')
  check.optionalFunction(o.onLost, 'options.onLost')
  check.optionalFunction(o.onSuspended, 'options.onSuspended')
  check.optionalFunction(o.onResumed, 'options.onResumed')
  return o.autoRefresh ? { onLost: o.onLost, onSuspended: o.onSuspended, onResumed: o.onResumed } : undefined
}

/** Drop-in for @lilith/distributed-lock's DistributedLock. */
class DistributedLock {
  #native
  // `{ native, connection, settings }`, shared by the locks of these settings: holds the native lock and
  // its connection alive while this lock lives.
  #shared
  // Its logger and onEvent hook (lib/tracing.js), when it has either; then its native lock
  // is its own, so that what the native side sees is told to this object's hook only.
  #tracer = null

  /**
   * Locks kept in this process (`memory://<name>`, default name ''), shared by every
   * worker_thread: no network, no Redis. Same semantics as over Redis.
   */
  static memory(name = '', options) {
    check.memoryName(name, 'name')
    return new DistributedLock(`memory://${name}`, options)
  }

  constructor(redis, options) {
    // A URL alone (the usual way to make one per job) is read by the native side, once.
    const url = typeof redis === 'string' && redis.length > 0
    const read = url ? undefined : connectionOptions(redis, 'redis', REDLOCK)
    const o = check.optionalObject(options, 'options')
    check.optionalString(o.keyPrefix, 'options.keyPrefix')
    check.optionalBoolean(o.fair, 'options.fair')
    check.optionalBoolean(o.lendOnHandover, 'options.lendOnHandover')
    check.optionalBoolean(o.stats, 'options.stats')
    check.optionalBoolean(o.crossProcessGrants, 'options.crossProcessGrants')
    check.optionalWholeMs(o.restartQuarantineMs, 'options.restartQuarantineMs')
    checkTracing(o.logger, o.onEvent, 'options')
    for (const name of ['defaultTtlMs', 'retryDelayMs', 'maxRetries', 'connectTimeoutMs', 'commandTimeoutMs', 'fenceRetentionMs']) {
      check.optionalNumber(o[name], `options.${name}`)
    }
    try {
      const settings = {
        keyPrefix: o.keyPrefix,
        clientKeyPrefix: read?.clientKeyPrefix,
        defaultTtlMs: o.defaultTtlMs,
        retryDelayMs: o.retryDelayMs,
        maxRetries: o.maxRetries,
        commandTimeoutMs: o.commandTimeoutMs,
        fair: o.fair,
        lendOnHandover: o.lendOnHandover,
        fenceRetentionMs: o.fenceRetentionMs,
        stats: o.stats,
      }
      const own = { crossProcessGrants: o.crossProcessGrants, restartQuarantineMs: o.restartQuarantineMs }
      const connection =
        url && o.connectTimeoutMs === undefined && !o.crossProcessGrants && !o.restartQuarantineMs
          ? sharedUrl(redis)
          : sharedWith(undefined, { ...(read ?? connectionOptions(redis, 'redis', REDLOCK)).connection, connectTimeoutMs: o.connectTimeoutMs }, own)
      // The native side keeps no state of its own between calls: one per set of settings.
      const make = () => ({
        native: new NativeDistributedLock(connection, settings, heartbeat),
        connection,
        settings,
      })
      this.#tracer = tracerOf('DistributedLock', o.logger, o.onEvent)
      this.#shared = this.#tracer === null ? sharedAlike(connection, 'distributed-lock', '', settings, make) : make()
      this.#native = this.#shared.native
      this.#tracer?.observe(this.#native, this)
    } catch (err) {
      throw withOptionPrefix(connectionError(fromNative(err), read ?? connectionOptions(redis, 'redis', REDLOCK)))
    }
  }

  /** Acquires `key`, retrying `maxRetries` times with exponential backoff. */
  acquire(key, ttlMs, options) {
    return callersFrames(
      this.#attempting(key, ttlMs, options, true, (handle, cancel, listener) =>
        this.#native.acquire(handle, key, ttlMs, cancel, listener),
      ),
    )
  }

  /** One attempt; `null` when someone else holds the lock. */
  tryAcquire(key, ttlMs, options) {
    return callersFrames(
      this.#attempting(key, ttlMs, options, false, (handle, _cancel, listener) =>
        this.#native.tryAcquire(handle, key, ttlMs, listener),
      ),
    )
  }

  /** Waits up to `timeoutMs` for the lock, however many attempts that takes. */
  waitForLock(key, timeoutMs, ttlMs, options) {
    try {
      check.string(key, 'key')
      check.number(timeoutMs, 'timeoutMs')
    } catch (err) {
      return Promise.reject(fromNative(err, key))
    }
    return Promise.resolve(
      this.#attempting(key, ttlMs, options, true, (handle, cancel, listener) =>
        this.#native.waitForLock(handle, key, timeoutMs, ttlMs, cancel, listener),
      ),
    ).then(undefined, (err) => {
      // A wait is bounded by time, not by a number of retries: say so.
      if (err instanceof LockAcquisitionError) {
        const counted = err.message
        err.message = `Failed to acquire lock "${key}" within ${timeoutMs} ms`
        const head = `${err.name}: ${counted}\n`
        if (typeof err.stack === 'string' && err.stack.startsWith(head)) err.stack = `${err.name}: ${err.message}\n${err.stack.slice(head.length)}`
      }
      throw fromNative(err, key)
    })
  }

  /** Whether anyone holds `key`. Rejects, never answers `false`, when Redis cannot be asked. */
  isLocked(key) {
    try {
      check.string(key, 'key')
      return callersFrames(this.#native.isLocked(key))
    } catch (err) {
      return Promise.reject(fromNative(err, key))
    }
  }

  /**
   * Acquires `key` (waiting up to `timeoutMs` when given, else as `acquire`), runs
   * `fn(handle, signal)`, and releases in `finally`. `signal` aborts with a LockLostError
   * when the lock is lost while `fn` runs. Resolves with what `fn` returns; rejects with
   * `fn`'s error, else with the LockLostError when the lock was lost before `fn` settled:
   * work that finished unprotected must not look as if it had been. An `autoRefresh` lock in
   * doubt as `fn` ends is waited for (by its TTL at most): resumed, it is released and `fn`'s
   * result returned; lost, the LockLostError. A plain one in doubt is asked of Redis (an
   * extend by 1 ms): still ours, `fn`'s result; gone or unanswered, the LockLostError.
   */
  async using(key, fn, options) {
    check.string(key, 'key')
    if (typeof fn !== 'function') check.optionalFunction(fn ?? null, 'fn')
    const o = check.optionalObject(options, 'options')
    // None of them given: no options object, so the acquisition takes the lane without
    // options (`#untraced`), as `acquire(key, ttlMs)` does, not the slow one that reads them.
    const given = { signal: o.signal, autoRefresh: o.autoRefresh, onLost: o.onLost, onSuspended: o.onSuspended, onResumed: o.onResumed }
    const acquireOptions = Object.values(given).some((value) => value !== undefined) ? given : undefined
    const handle =
      o.timeoutMs === undefined
        ? await this.acquire(key, o.ttlMs, acquireOptions)
        : await this.waitForLock(key, o.timeoutMs, o.ttlMs, acquireOptions)
    const loss = lossSignal(handle, o.autoRefresh === true, () => handle[GONE]())
    let result
    try {
      result = await fn(handle, loss.signal)
    } catch (err) {
      loss.stop()
      // The work's own failure is the one to report; the lock expires by TTL if this fails.
      await handle.release().catch(() => {})
      throw err
    }
    // In doubt as `fn` ended (its connection dropped, no refresh has answered since): neither
    // kept nor lost yet. The watchdog's word decides, by the lock's TTL at the latest.
    // A plain hold in doubt (a drop or an unanswered call since Redis last confirmed it) is
    // not lost for that: Redis says, by an extend of 1 ms that only succeeds on our token.
    if (o.autoRefresh === true) {
      await untilAborted(handle[DOUBT_ENDED](), o.signal)
      // The caller gave up waiting on the doubt: answered with its reason, not kept waiting.
      if (o.signal?.aborted && handle.suspended) {
        loss.stop()
        // Not waited for: it goes over the connection whose answers the caller gave up on.
        handle.release().catch(() => {})
        throw o.signal.reason
      }
    } else if (handle.suspended && handle[IN_LEASE]()) {
      const unconfirmed = await handle.extend(1).then(
        () => null,
        (err) => err,
      )
      if (unconfirmed !== null) {
        loss.stop()
        // Found gone (ENOTHELD), the handle is already released; unanswered, it may not be.
        if (unconfirmed.code !== 'ENOTHELD') await handle.release().catch(() => {})
        const why = unconfirmed.code === 'ENOTHELD' ? 'Redis no longer had it' : 'nothing confirmed it since'
        throw new LockLostError(handle.key, `Lock "${handle.key}" was lost: its connection to Redis dropped and ${why}`)
      }
    }
    const lost = loss.stop()
    if (lost !== null) {
      await handle.release().catch(() => {})
      throw lost
    }
    await handle.release()
    return result
  }

  /**
   * `acquire`, `tryAcquire` and `waitForLock`: without options, straight to the native call,
   * whose answer may be its value rather than a promise (see `callersFrames`).
   */
  #attempting(key, ttlMs, options, cancellable, start) {
    if (this.#tracer !== null) {
      const started = performance.now()
      return this.#traced(key, started, Promise.resolve(this.#untraced(key, ttlMs, options, cancellable, start)))
    }
    return this.#untraced(key, ttlMs, options, cancellable, start)
  }

  #untraced(key, ttlMs, options, cancellable, start) {
    try {
      check.string(key, 'key')
      check.optionalNumber(ttlMs, 'ttlMs')
      if (options === undefined) return start(new LockHandle(CONSTRUCTING, this.#native, key, undefined, this.#tracer))
    } catch (err) {
      return Promise.reject(fromNative(err, key))
    }
    return this.#acquiring(key, options, cancellable, start)
  }

  /** An acquisition told to the tracer as it ends. */
  #traced(key, started, pending) {
    const tracer = this.#tracer
    return pending.then(
      (handle) => {
        if (handle !== null) tracer.acquired(handle.key, handle.fence, started)
        return handle
      },
      (err) => {
        // Not converted here: the caller's conversion gives it the caller's stack.
        tracer.error(typeof key === 'string' ? key.toWellFormed() : key, err, 'acquire')
        throw err
      },
    )
  }

  /** The slow path: options (a signal, `autoRefresh`) to read and honour. */
  async #acquiring(key, options, cancellable, start) {
    const o = check.optionalObject(options, 'options')
    const signal = cancellable ? check.optionalSignal(o.signal, 'options.signal') : undefined
    const handle = new LockHandle(CONSTRUCTING, this.#native, key, autoRefreshOf(o), this.#tracer)
    try {
      const won = await withSignal(signal, (cancel) => start(handle, cancel, handle[LISTENER] || undefined))
      if (won === null) handle[STOP]()
      if (won !== null && signal?.aborted) {
        // Won in the instant after the caller gave up: hand it back rather than out.
        await won.release().catch(() => {})
        throw signal.reason
      }
      return won
    } catch (err) {
      handle[STOP]()
      throw fromNative(err, key)
    }
  }

  /**
   * Writes `value` to the hash at `key` unless a write with a higher fencing token already
   * landed there: the fenced store that makes a paused, expired holder's late write harmless.
   * Resolves `true` when written, `false` when rejected as stale.
   */
  fencedSet(key, value, fence) {
    try {
      check.string(key, 'key')
      check.string(value, 'value')
      check.string(fence, 'fence')
      return callersFrames(this.#native.fencedSet(key, value, fence))
    } catch (err) {
      return Promise.reject(fromNative(err, key))
    }
  }

  /**
   * What this object's calls have done since it was made (with every object of the same
   * connection and settings, which share its native side): see README "Stats".
   */
  stats() {
    return statsOf(this.#native)
  }
}

// The core names options as the native layer receives them; users wrote `options.x`.
function withOptionPrefix(err) {
  // `fair` is refused natively over a Redlock.
  // `restartQuarantineMs` is checked natively too (its range).
  const names = ['defaultTtlMs', 'retryDelayMs', 'maxRetries', 'connectTimeoutMs', 'commandTimeoutMs', 'fenceRetentionMs', 'fair', 'restartQuarantineMs']
  if (err.code === 'EINVAL' && names.includes(err.argument)) {
    err.message = `options.${err.message}`
    err.argument = `options.${err.argument}`
  }
  return err
}

module.exports = { DistributedLock, LockHandle }
