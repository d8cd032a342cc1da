'use strict'

// The `logger` option and `onEvent` hook of every API object (README "Tracing"). Made only
// when one of them is given: without, the API objects hold `null` and pay one check per call.

const { listen, unlisten } = require('./completions')

/** The level each event is logged at (README "Tracing"). */
const LEVELS = {
  acquired: 'debug',
  contended: 'debug',
  woken: 'debug',
  'handed-over': 'debug',
  refreshed: 'debug',
  released: 'debug',
  lost: 'warn',
  suspended: 'warn',
  resumed: 'info',
  error: 'error',
}

const MESSAGES = {
  acquired: 'lock acquired',
  contended: 'lock held by another holder',
  woken: 'waiter woken by a release',
  'handed-over': 'lock handed over by a release',
  refreshed: 'lock refreshed',
  released: 'lock released',
  lost: 'lock lost',
  suspended: 'lock in doubt: its connection dropped',
  resumed: 'lock confirmed again after a dropped connection',
  error: 'lock call failed',
}

// Fields that let whoever reads them release or extend the lock (syncguard's lockId): the
// user's own hook gets them, a log never does.
const SECRETS = ['lockId']

/** `event` itself, or a copy without its secret fields when it has any. */
function loggable(event) {
  if (!SECRETS.some((field) => field in event)) return event
  const copy = { ...event }
  for (const field of SECRETS) delete copy[field]
  return copy
}

// Frees a traced object's listener slot once the object is gone.
const forget = new FinalizationRegistry((listener) => unlisten(listener))

/**
 * Checks `logger` (pino-, winston- or console-shaped: `debug`, `info`, `warn`, `error`
 * functions) and `onEvent` (a function), naming `where` in the error.
 */
function checkTracing(logger, onEvent, where) {
  if (logger !== undefined && logger !== null) {
    const ok = typeof logger === 'object' || typeof logger === 'function'
    const missing = ok ? ['debug', 'info', 'warn', 'error'].find((level) => typeof logger[level] !== 'function') : 'debug'
    if (missing !== undefined) {
      const err = new TypeError(`${where}.logger must have debug, info, warn and error methods (missing ${missing})`)
      err.code = 'EINVAL'
      err.argument = `${where}.logger`
      throw err
    }
  }
  if (onEvent !== undefined && onEvent !== null && typeof onEvent !== 'function') {
    const err = new TypeError(`${where}.onEvent must be a function, got ${typeof onEvent}`)
    err.code = 'EINVAL'
    err.argument = `${where}.onEvent`
    throw err
  }
}

class Tracer {
  #api
  #logger
  #onEvent
  // pino takes `(fields, message)`; winston and console `(message, fields)`.
  #fieldsFirst
  // Whether events are logged, or only a throwing hook (an API whose logger logs its own
  // original's messages: maestro's).
  #logsEvents

  constructor(api, logger, onEvent, logsEvents) {
    this.#api = api
    this.#logger = logger ?? null
    this.#onEvent = onEvent ?? null
    this.#fieldsFirst = typeof logger?.bindings === 'function'
    this.#logsEvents = logsEvents
  }

  /**
   * Tells the hook and the logger of `event` (`{ type, key, ... }`). Neither may break a
   * lock: a throwing hook is logged at `error`, a throwing logger is ignored.
   */
  emit(event) {
    event.api = this.#api
    event.at = Date.now()
    if (this.#onEvent !== null) {
      try {
        this.#onEvent(event)
      } catch (err) {
        this.#log('error', 'onEvent hook threw', { type: event.type, key: event.key, error: err })
      }
    }
    if (this.#logsEvents) this.#log(LEVELS[event.type], MESSAGES[event.type], loggable(event))
  }

  #log(level, message, fields) {
    if (this.#logger === null) return
    try {
      if (this.#fieldsFirst) this.#logger[level](fields, `native-redis-lock: ${message}`)
      else this.#logger[level](`native-redis-lock: ${message}`, fields)
    } catch {
      // A logger that throws must not break a lock either.
    }
  }

  /** An acquisition asked for at `started` (performance.now()) won `fence`. */
  acquired(key, fence, started) {
    this.emit({ type: 'acquired', key, fence, waitedMs: performance.now() - started })
  }

  released(key, fence, heldMs) {
    this.emit({ type: 'released', key, fence, heldMs })
  }

  refreshed(key, fence, ttlMs) {
    this.emit({ type: 'refreshed', key, fence, ttlMs })
  }

  lost(key, fence, error) {
    this.emit({ type: 'lost', key, fence, code: error?.code, error })
  }

  /** The hold's connection dropped (`suspended` true) or a refresh confirmed it since. */
  doubt(key, fence, suspended) {
    this.emit({ type: suspended ? 'suspended' : 'resumed', key, fence })
  }

  error(key, error, call) {
    this.emit({ type: 'error', key, call, code: error?.code, error })
  }

  /**
   * Makes `native` (an object of this tracer's alone) tell the hook of its contentions,
   * wake-ups and hand-overs, which only the native side sees, for as long as `owner` lives.
   */
  observe(native, owner) {
    const listener = listen((event, _code, key) => this.emit({ type: event, key }))
    native.observe(listener)
    forget.register(owner, listener)
  }
}

/**
 * A tracer for `api` when a logger or hook is given, else `null`. `logsEvents` false: the
 * logger hears only of a throwing hook.
 */
function tracerOf(api, logger, onEvent, logsEvents = true) {
  const logged = logsEvents && logger !== undefined && logger !== null
  if (!logged && (onEvent === undefined || onEvent === null)) return null
  return new Tracer(api, logger, onEvent, logged)
}

module.exports = { tracerOf, checkTracing, LEVELS }
