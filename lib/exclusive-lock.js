'use strict'

const EventEmitter = require('node:events')
const { NativeExclusiveLock } = require('./native')
const { connectionOptions, connectionError } = require('./connection')
const { sharedAlike, sharedWith } = require('./shared-connection')
// An array of servers is a Redlock over them (docs/plans/redlock.md).
const REDLOCK = { redlock: true }
const { LockLostError, fromNative } = require('./errors')
const { heartbeat, KeepAlive, Beating, missed } = require('./liveness')
const { completions, listen, unlisten } = require('./completions')
const { statsOf } = require('./stats')
const { tracerOf, checkTracing } = require('./tracing')
const check = require('./validate')

// The original's default logger (abstract-logging) is silent.
const noop = () => {}
const SILENT = Object.freeze({ info: noop, warn: noop, error: noop, debug: noop, trace: noop })

const DEFAULTS = { lock_ttl_ms: 3000, lock_refresh_ms: 1000, lock_contents: '1', key_prefix: 'exclusive-lock' }

// The schema's types, in its order.
const TYPES = Object.entries({
  name: 'string',
  cache_connection: 'object or URL',
  log: 'object',
  lock_ttl_ms: 'number',
  lock_refresh_ms: 'number',
  lock_contents: 'string',
  key_prefix: 'string',
  max_stall_ms: 'number',
  max_hold_ms: 'number',
  // Ours: Infinity (keep fence counters forever) too; the core checks the range.
  fence_retention_ms: 'number or Infinity',
  // Ours: false keeps stats() at zero (README "Stats").
  stats: 'boolean',
  // Ours: grants across processes (README "Grants across processes").
  cross_process_grants: 'boolean',
  // Ours: no lock for this long after a Redis restart (README "Guarantees"); 0 is off.
  restart_quarantine_ms: 'number',
})

// The original validates with an ajv schema and reports the first failure in ajv's words.
function schemaError(opts) {
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts)) return ['', 'must be object']
  for (const name of ['name', 'cache_connection']) {
    if (opts[name] === undefined) return ['', `must have required property '${name}'`]
  }
  const ttl = opts.lock_ttl_ms !== undefined
  const refresh = opts.lock_refresh_ms !== undefined
  if (ttl && !refresh) return ['', 'must have property lock_refresh_ms when property lock_ttl_ms is present']
  if (refresh && !ttl) return ['', 'must have property lock_ttl_ms when property lock_refresh_ms is present']
  for (const [name, type] of TYPES) {
    const value = opts[name]
    if (value === undefined) continue
    if (type === 'object or URL') {
      // The schema wants an object; ours also takes a URL string, and an array of servers (a
      // Redlock). Which objects will do is checked after the schema, as the original checks for `.set()`.
      const object = typeof value === 'object' && value !== null
      if (!object && typeof value !== 'string') return [`/${name}`, 'must be object']
      continue
    }
    // ajv's `number` is a finite number.
    const ok =
      type === 'number' ? Number.isFinite(value)
      : type === 'number or Infinity' ? typeof value === 'number' && !Number.isNaN(value)
      : typeof value === type && value !== null
    if (!ok) return [`/${name}`, `must be ${type === 'number or Infinity' ? 'number' : type}`]
    if (name === 'name' && value.length < 1) return ['/name', 'must NOT have fewer than 1 characters']
  }
  return null
}

/** `opts[name]` as `{ ...DEFAULTS, ...opts }` would have it, without copying every field. */
function option(opts, name) {
  return Object.prototype.propertyIsEnumerable.call(opts, name) ? opts[name] : DEFAULTS[name]
}

function einval(err, extra) {
  err.code = 'EINVAL'
  return Object.assign(err, extra)
}

/**
 * Drop-in for @logdna/exclusive-lock: one exclusive, auto-refreshed lock per instance. The
 * refresh timer runs on the native (tokio) side; this class only turns its news into events.
 */
/** What `refresh_timer` is while the lock is held: a handle on the native refresh. */
class RefreshTimer {
  #lock

  constructor(lock) {
    this.#lock = lock
  }

  hasRef() {
    return this.#lock.hasRef()
  }

  ref() {
    this.#lock.ref()
    return this
  }

  unref() {
    this.#lock.unref()
    return this
  }
}

/**
 * The native lock of these settings on `connection`, shared by every instance made with them
 * (it keeps each hold apart by its listener), with its key and name read once.
 */
function nativeLock(connection, settings, own) {
  const make = () => {
    const native = new NativeExclusiveLock(connection, settings, heartbeat)
    return { native, connection, key: native.key, name: native.name, settings }
  }
  // A traced lock has its own (its hook alone hears what the native side sees).
  return own ? make() : sharedAlike(connection, 'exclusive-lock', settings.name, settings, make)
}

// `this` is the lock (EventEmitter calls listeners so): no closures made per instance.
// 'newListener' comes before the listener is added, 'removeListener' after it is gone.
function onNewListener(event) {
  if (event === 'refreshed') this[WANT_REFRESHED](true)
}

function onRemoveListener(event) {
  if (event === 'refreshed') this[WANT_REFRESHED](this.listenerCount('refreshed') > 0)
}

const WANT_REFRESHED = Symbol('wantRefreshed')

// A release failing with these found the lock not ours: no failure for a release.
const GONE_CODES = new Set(['ENOTHELD', 'ELOST'])

class ExclusiveLock extends EventEmitter {
  // `{ native, key, name }`, shared by the instances of these settings: holds the native
  // lock and its connection alive while this lock lives.
  #shared
  #native
  // The native lock's key, read once: it never changes, and the hot path names it.
  #key
  #acquired = false
  // The hold's connection dropped and no refresh has confirmed it since (in doubt).
  #suspended = false
  // The hold was found lost; its automatic release is on its way (over a partition that can
  // take the command timeout), and `acquired` must not read true meanwhile.
  #lost = false
  #lostRelease = null
  // The hold whose native events count; an attempt that loses never replaces it. Its
  // listener names it in every native call about it.
  #hold = null
  // Whether the logger records refreshes (then `refreshed` crosses into JS even unheard).
  #traced = false
  #keepAlive = new KeepAlive()
  #beating = new Beating()
  #refed = true
  #stallGuarded
  // The attempt in flight, if any: `{ released, done, settle }`. A release() made meanwhile wins.
  #attempt = null
  #timer = null
  // Our `logger` and `onEvent` (lib/tracing.js), when given; `log` stays the original's.
  #tracer = null

  constructor(opts) {
    super()
    // As the original: no options at all are an empty object, which lacks its `name`.
    opts = opts ?? {}
    const log = opts.log || SILENT
    const failure = schemaError(opts)
    if (failure) {
      const err = einval(new Error('Input validation failed'), {
        errors: [{ instancePath: failure[0], message: failure[1] }],
      })
      log.error?.(err)
      throw err
    }
    const given = opts.cache_connection
    // A URL alone (the usual way to make one per job) is read by the native side, once.
    const url = typeof given === 'string' && given.length > 0
    let connection
    try {
      connection = url ? undefined : connectionOptions(given, 'cache_connection', REDLOCK)
    } catch (err) {
      // A connection with a bad TLS option, or a Redlock's node, keeps its own message; the rest is the original's.
      if (err.argument?.startsWith('cache_connection.tls') || err.argument?.startsWith('cache_connection[')) throw err
      // The original's words; what exactly was wrong, and with what, is the cause.
      throw einval(new TypeError('A valid cache_connection to a cache store is required', { cause: err }), {
        argument: 'cache_connection',
      })
    }
    const o = {
      name: option(opts, 'name'),
      lock_ttl_ms: option(opts, 'lock_ttl_ms'),
      lock_refresh_ms: option(opts, 'lock_refresh_ms'),
      lock_contents: option(opts, 'lock_contents'),
      key_prefix: option(opts, 'key_prefix'),
      max_stall_ms: option(opts, 'max_stall_ms'),
      max_hold_ms: option(opts, 'max_hold_ms'),
      fence_retention_ms: option(opts, 'fence_retention_ms'),
      stats: option(opts, 'stats'),
    }
    check.optionalWholeMs(option(opts, 'restart_quarantine_ms'), 'restart_quarantine_ms')
    const diff = o.lock_ttl_ms - o.lock_refresh_ms
    if (!(diff >= 500)) {
      throw einval(new RangeError('lock_refresh_ms must be at least 500ms less than lock_ttl_ms'), {
        meta: { lock_ttl_ms: o.lock_ttl_ms, lock_refresh_ms: o.lock_refresh_ms, diff },
      })
    }
    const maxStall = o.max_stall_ms ?? 3 * o.lock_ttl_ms
    checkTracing(opts.logger, opts.onEvent, 'opts')
    this.#tracer = tracerOf('ExclusiveLock', opts.logger, opts.onEvent)
    try {
      // The TTL and refresh are checked by the native constructor (as numbers the native side
      // takes) but read anew at every acquire(), so they are part of the settings shared.
      const own = {
        crossProcessGrants: option(opts, 'cross_process_grants'),
        restartQuarantineMs: option(opts, 'restart_quarantine_ms'),
      }
      const shared = sharedWith(url ? given : undefined, url ? undefined : connection.connection, own)
      this.#shared = nativeLock(shared, {
        name: o.name,
        keyPrefix: o.key_prefix,
        clientKeyPrefix: connection?.clientKeyPrefix,
        lockTtlMs: o.lock_ttl_ms,
        lockRefreshMs: o.lock_refresh_ms,
        maxStallMs: maxStall,
        maxHoldMs: o.max_hold_ms,
        fenceRetentionMs: o.fence_retention_ms,
        stats: o.stats,
      }, this.#tracer !== null)
    } catch (err) {
      const named = fromNative(err)
      if (named.argument === 'restartQuarantineMs') {
        // Refused natively on a Redlock or a Cluster, under the core's name.
        named.message = named.message.replaceAll('restartQuarantineMs', 'restart_quarantine_ms')
        named.argument = 'restart_quarantine_ms'
      }
      throw connectionError(named, connection ?? connectionOptions(given, 'cache_connection', REDLOCK))
    }
    this.#native = this.#shared.native
    this.#tracer?.observe(this.#native, this)
    this.#stallGuarded = maxStall > 0
    this.#key = this.#shared.key
    this.name = this.#shared.name
    this.log = log
    this.cache_connection = opts.cache_connection
    this.lock_ttl_ms = o.lock_ttl_ms
    this.lock_refresh_ms = o.lock_refresh_ms
    this.lock_contents = o.lock_contents
    this.max_stall_ms = maxStall
    this.max_hold_ms = o.max_hold_ms
    // `refreshed` crosses from Rust into JS only while someone listens for it or the logger
    // records refreshes (the original logged each one at trace level).
    this.#traced = typeof log.isLevelEnabled === 'function' && log.isLevelEnabled('trace') === true
    this.on('newListener', onNewListener)
    this.on('removeListener', onRemoveListener)
  }

  /** Whether this lock's holds should send their `refreshed` events into JS. */
  #wantsRefreshed() {
    return this.#traced || this.#tracer !== null || this.listenerCount('refreshed') > 0
  }

  /** Tells the hold, if any, whether `refreshed` is wanted now (`heard`: a listener is). */
  [WANT_REFRESHED](heard) {
    if (this.#hold !== null) this.#native.wantRefreshed(this.#hold.listener, this.#traced || this.#tracer !== null || heard)
  }

  get [Symbol.toStringTag]() {
    return 'ExclusiveLock'
  }

  get key() {
    return this.#key
  }

  /** False while the lock is in doubt (its connection dropped, not confirmed since), and
   * from the moment it is found lost. */
  get acquired() {
    return this.#acquired && !this.#suspended && !this.#lost
  }

  /**
   * What this object's calls have done since it was made (with every object of the same
   * connection and settings, which share its native side): see README "Stats".
   */
  stats() {
    return statsOf(this.#native)
  }

  // The original's fields are assignable; ours follow the native hold, so an assignment
  // changes nothing.
  set acquired(_value) {}

  /** The original's field: whether a refresh is on its way to Redis right now. */
  get is_refreshing() {
    return this.#acquired && this.#hold !== null && this.#native.refreshing(this.#hold.listener)
  }

  // The original's users (and its own tests) reset the flag by hand; the refresh is native
  // and keeps its own state, so the assignment changes nothing.
  set is_refreshing(_value) {}

  /**
   * The original's field: its refresh interval while the lock is held, `null` otherwise. Ours
   * runs natively; this stands for it, and its `unref()` / `ref()` / `hasRef()` act on whether
   * the held lock keeps the process alive, as they did on the original's timer.
   */
  get refresh_timer() {
    // Null from the start of release(), as the original clears its timer before the DEL.
    if (!this.#acquired || this.#hold === null) return null
    this.#timer ??= new RefreshTimer(this)
    return this.#timer
  }

  set refresh_timer(_value) {}

  /** Fencing token of the current hold (15-digit decimal string), or null when not held. */
  get fence() {
    return this.#acquired && this.#hold !== null ? this.#native.fence(this.#hold.listener) : null
  }

  /** One attempt; `true` when this instance holds the lock (again, when it already did). */
  async acquire() {
    // A lost hold's release still on its way: no "already acquired" answer for a lock that is
    // gone (an 'error' listener may well try again at once); the attempt comes after it.
    if (this.#lost) await this.#lostRelease.catch(() => {})
    if (this.#acquired) {
      this.log.warn('%s lock is already acquired. Must call release() first.', this.#key)
      return true
    }
    // `done` is made only when a release() waits on it: most attempts never need one.
    const attempt = { released: false, done: null, settle: null }
    this.#attempt = attempt
    const started = this.#tracer === null ? 0 : performance.now()
    // One async function for the whole attempt (no inner one to await): this is the hot path.
    try {
      // The TTL this hold is refreshed to: the instance's field when it was taken.
      const hold = { ttl: this.lock_ttl_ms, listener: 0 }
      hold.listener = listen((event, code, message) => this.#onNative(hold, event, message))
      // Counted as held from now, the change riding on the acquire call: most attempts win.
      const keep = this.#keepAlive.handOff(this.#refed)
      const beat = this.#beating.handOff(this.#stallGuarded)
      // What the hold starts with; changed meanwhile, it is told once won.
      const unrefed = !this.#refed
      const refreshed = this.#wantsRefreshed()
      let won
      try {
        // Read now, as the original reads them at every acquire.
        let pending
        try {
          pending = this.#native.acquire(
            hold.listener,
            this.lock_contents,
            this.lock_ttl_ms,
            this.lock_refresh_ms,
            keep,
            beat,
            unrefed,
            refreshed,
          )
        } catch (err) {
          missed(keep, beat)
          throw err
        }
        won = await pending
      } catch (err) {
        this.#lose(attempt, hold)
        const error = fromNative(err, this.#key)
        this.#tracer?.error(this.#key, error, 'acquire')
        throw error
      }
      if (won && attempt.released) {
        // release() was called while this attempt was in flight: the release wins, and the
        // lock Redis granted meanwhile is deleted before either call resolves.
        this.#lose(attempt, hold)
        try {
          await this.#native.release(hold.listener, 0, 0)
        } catch (err) {
          throw fromNative(err, this.#key)
        }
        return false
      }
      if (!won) {
        this.#lose(attempt, hold)
        return false
      }
      this.#hold = hold
      this.#suspended = false
      this.#acquired = true
      if (unrefed === this.#refed) this.#native.setUnrefed(hold.listener, !this.#refed)
      if (refreshed !== this.#wantsRefreshed()) this[WANT_REFRESHED](this.listenerCount('refreshed') > 0)
      // No-ops unless an attempt that lost meanwhile undid them, or unref() came in between.
      this.#keepAlive.set(this.#refed)
      this.#beating.set(this.#stallGuarded)
      if (this.log !== SILENT) {
        this.log.info(
          { lock_contents: this.lock_contents, lock_refresh_ms: this.lock_refresh_ms, lock_ttl_ms: this.lock_ttl_ms },
          '%s lock acquired',
          this.name,
        )
      }
      this.#tracer?.acquired(this.#key, this.fence, started)
      hold.at = Date.now()
      this.emit('acquired', this.#key)
      return true
    } finally {
      if (this.#attempt === attempt) this.#attempt = null
      attempt.settle?.()
    }
  }

  /** `{ lock_ttl_ms, lock_contents }` of whoever holds the lock, or `null`. */
  async inspect() {
    try {
      return (await this.#native.inspect()) ?? null
    } catch (err) {
      const error = fromNative(err, this.key)
      this.log.error({ key: this.key, err: error }, 'Error during inspect while getting the key: %s', error)
      throw error
    }
  }

  /**
   * Stops refreshing and deletes the lock if it is still ours. A no-op when not held; with an
   * acquire() in flight, that acquisition ends released (resolving `false`), and this
   * resolves once it has.
   */
  async release() {
    if (!this.#acquired) {
      const attempt = this.#attempt
      if (attempt) {
        attempt.released = true
        attempt.done ??= new Promise((resolve) => (attempt.settle = resolve))
        await attempt.done
      }
      return
    }
    const listener = this.#hold?.listener ?? 0
    const fence = this.#tracer === null ? null : this.fence
    const heldSince = this.#hold?.at
    unlisten(listener)
    this.#hold = null
    this.#suspended = false
    const keep = this.#keepAlive.handOff(false)
    const beat = this.#beating.handOff(false)
    try {
      let pending
      try {
        pending = this.#native.release(listener, keep, beat)
      } catch (err) {
        missed(keep, beat)
        throw err
      }
      try {
        await pending
      } catch (err) {
        // Found not ours (the lock is gone already, as a loss said): what a release wants,
        // and what the original's DEL of a vanished key did without failing.
        if (!GONE_CODES.has(err?.code)) throw err
      }
      this.log.info('%s lock removed', this.#key)
      this.#tracer?.released(this.#key, fence, heldSince === undefined ? undefined : Date.now() - heldSince)
      this.emit('released', this.#key)
    } catch (err) {
      const error = fromNative(err, this.#key)
      this.#tracer?.error(this.#key, error, 'release')
      throw error
    } finally {
      this.#acquired = false
      this.#lost = false
    }
  }

  /** An attempt that did not become the hold: its listener goes, and its liveness claims
   * too unless the lock is held or another attempt, made since, still counts on them. */
  #lose(attempt, hold) {
    unlisten(hold.listener)
    if (this.#acquired || this.#attempt !== attempt) return
    this.#keepAlive.set(false)
    this.#beating.set(false)
  }

  /** Whether a held lock keeps the process alive (see `unref()`). */
  hasRef() {
    return this.#refed
  }

  /** Lets the process exit while the lock is held (the refreshes go on while it runs). */
  unref() {
    this.#refed = false
    this.#keepAlive.set(false)
    // As with the original, a lock held as the process exits then expires by its TTL.
    if (this.#hold !== null) this.#native.setUnrefed(this.#hold.listener, true)
    return this
  }

  /** Keeps the process alive while the lock is held (the default). */
  ref() {
    this.#refed = true
    this.#keepAlive.set(this.#acquired)
    if (this.#hold !== null) this.#native.setUnrefed(this.#hold.listener, false)
    return this
  }

  #onNative(hold, event, message) {
    if (hold !== this.#hold) return
    if (event === 'suspended' || event === 'resumed') {
      if (this.#suspended === (event === 'suspended')) return
      this.#suspended = !this.#suspended
      this.#tracer?.doubt(this.key, this.fence, this.#suspended)
      this.log.warn?.('%s lock %s', this.key, event)
      this.emit(event, { key: this.key })
      return
    }
    if (event === 'refreshed') {
      this.#tracer?.refreshed(this.key, this.fence, hold.ttl)
      this.log.trace?.('%s lock refreshed to %sms', this.key, hold.ttl)
      this.emit('refreshed', { key: this.key, lock_ttl_ms: hold.ttl })
      return
    }
    const err = new LockLostError(this.key, message)
    this.#tracer?.lost(this.key, this.fence, err)
    this.log.error({ err }, 'Could not refresh lock: %s', err)
    // The release starts before the 'error': emitting it with no listener (or a listener that
    // throws) throws, by EventEmitter's rule, as the original's refresh failure did, and a
    // process that catches that throw must still see the lock released. The events keep the
    // original's order: 'released' comes once the release is answered, after 'error'.
    this.#lost = true
    const releasing = this.release()
    this.#lostRelease = releasing
    releasing.catch((releaseError) => {
      const error = fromNative(releaseError, this.key)
      // Every 'error' names its lock, the loss's and this one alike (as the types say).
      error.key ??= this.key
      this.log.error({ err: error }, 'Error removing lock %s: %s', this.key, error)
      // Thrown, when unheard, as an uncaught exception like the first, not a rejection.
      process.nextTick(() => this.emit('error', error))
    })
    this.emit('error', err)
  }
}

module.exports = { ExclusiveLock }
