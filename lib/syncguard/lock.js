'use strict'

// syncguard's lock(backend, fn, config) and createLock(redis, options). On our own backend the
// acquisition is one native call (its schedule is syncguard's, and a release made through this
// package wakes it at once); on any other backend, or ours wrapped, syncguard's loop runs here
// over backend.acquire, its schedule asked of the same native formula (NativeSyncguard.pacedNext).

const { NativeCancel, NativePace, NativeSyncguard } = require('../native')
const { BACKEND_DEFAULTS, LOCK_DEFAULTS } = require('./constants')
const { LockError } = require('./errors')
const { normalizeAndValidateKey } = require('./validation')
const { generateLockId } = require('./keys')
const { defaultOnReleaseError, report } = require('./disposable')
const { createRedisBackend, nativeOf } = require('./backend')

/**
 * The acquisition options as syncguard's arithmetic reads them (never validated): numbers by
 * JS's own coercion, so NaN, infinities, negatives and fractions act as they do there.
 */
function paceOf(acquisition) {
  const option = (name) => acquisition?.[name] ?? LOCK_DEFAULTS[name]
  const name = (value) => (typeof value === 'string' ? value : '')
  return {
    maxRetries: Number(option('maxRetries')),
    retryDelayMs: Number(option('retryDelayMs')),
    backoff: name(option('backoff')),
    jitter: name(option('jitter')),
    timeoutMs: Number(option('timeoutMs')),
  }
}

// The last pace converted for the native side: calls in a row mostly share their options.
let lastPace
let lastNativePace

/** `pace` as the native lock takes it, converted again only when an option differs. */
function nativePaceOf(pace) {
  const same =
    lastPace !== undefined &&
    Object.is(pace.maxRetries, lastPace.maxRetries) &&
    Object.is(pace.retryDelayMs, lastPace.retryDelayMs) &&
    pace.backoff === lastPace.backoff &&
    pace.jitter === lastPace.jitter &&
    Object.is(pace.timeoutMs, lastPace.timeoutMs)
  if (!same) {
    lastNativePace = new NativePace(pace)
    lastPace = pace
  }
  return lastNativePace
}

/** Throws syncguard's Aborted for whichever signal is aborted, the caller's first. */
function checkSignals(config, key) {
  if (config.signal?.aborted) throw new LockError('Aborted', 'Operation cancelled by user signal', { key })
  if (config.acquisition?.signal?.aborted) {
    throw new LockError('Aborted', 'Acquisition cancelled by acquisition signal', { key })
  }
}

/** syncguard's ending for scheduled attempt `attempts`, if the schedule says one. */
function ending(step, key) {
  return step.message === undefined || step.message === null
    ? undefined
    : new LockError('AcquisitionTimeout', step.message, { key })
}

/** Anything an attempt threw, as lock() rethrows it. */
function asLockError(error, key) {
  if (error instanceof LockError) return error
  return new LockError('Internal', error instanceof Error ? error.message : String(error), { key, cause: error })
}

/**
 * syncguard's ending before scheduled attempt `attempts`, if any. The check itself is JS's
 * (the same comparison as Pace::before): the native schedule is asked only for the message.
 */
function endingBefore(pace, attempts, elapsedMs, key) {
  if (!(Math.max(0, elapsedMs) >= pace.timeoutMs)) return undefined
  return ending(NativeSyncguard.pacedNext(pace, attempts, elapsedMs, false), key)
}

/** The lockId of a lock won on our backend, natively: paced, woken, ended by either signal. */
async function acquireNatively(own, entry, ttlMs, pace, config, startedAt) {
  const key = entry.normalized
  const gaveUp = endingBefore(pace, 1, Date.now() - startedAt, key)
  if (gaveUp) throw gaveUp
  checkSignals(config, key)
  const keys = own.keysOf(entry, generateLockId())
  const { signal } = config
  const acquisitionSignal = config.acquisition?.signal
  // A canceller only for a call that has a signal to listen to.
  const cancel = signal != null || acquisitionSignal != null ? new NativeCancel() : undefined
  const onAbort = cancel && (() => cancel.cancel())
  signal?.addEventListener?.('abort', onAbort, { once: true })
  acquisitionSignal?.addEventListener?.('abort', onAbort, { once: true })
  try {
    const won = await own.native.lock(keys, ttlMs, nativePaceOf(pace), Date.now() - startedAt, cancel)
    // The tracer's start on performance.now()'s clock: no clock read when nothing traces.
    const started = own.tracer ? performance.now() - (Date.now() - startedAt) : 0
    const result = own.wonWith(keys, won, key, started)
    if (result instanceof Promise) await result
    return keys.lockId
  } catch (err) {
    own.tracer?.error(key, err, 'lock')
    if (err instanceof LockError) throw err
    if (err?.code === 'EGAVEUP') throw new LockError('AcquisitionTimeout', err.message, { key })
    if (err?.code === 'EABORTED') {
      const message = config.signal?.aborted
        ? 'Operation cancelled by user signal'
        : 'Acquisition cancelled by acquisition signal'
      throw new LockError('Aborted', message, { key })
    }
    throw own.toLockError(err)
  } finally {
    signal?.removeEventListener?.('abort', onAbort)
    acquisitionSignal?.removeEventListener?.('abort', onAbort)
  }
}

/** syncguard's loop over `backend.acquire`, for a backend that is not (or no longer) ours. */
async function acquireInJs(backend, key, ttlMs, pace, config, startedAt) {
  for (let attempts = 1; ; attempts++) {
    const gaveUp = endingBefore(pace, attempts, Date.now() - startedAt, key)
    if (gaveUp) throw gaveUp
    checkSignals(config, key)
    try {
      const result = await backend.acquire({ key, ttlMs, signal: config.signal })
      if (result.ok) return result.lockId
      const next = NativeSyncguard.pacedNext(pace, attempts, Date.now() - startedAt, true)
      const stop = ending(next, key)
      if (stop) throw stop
      await new Promise((resolve) => setTimeout(resolve, next.delayMs))
    } catch (error) {
      throw asLockError(error, key)
    }
  }
}

/** syncguard's `lock(backend, fn, config)`: fn under the lock, released after. */
async function lock(backend, fn, config) {
  const own = nativeOf(backend)
  // Ours remembers a key's normalised form and storage keys; both throw alike for a bad key.
  const entry = own ? own.entryOf(config.key) : undefined
  const key = entry ? entry.normalized : normalizeAndValidateKey(config.key)
  // Read at each call: a user who assigns to the exported defaults changes them.
  const ttlMs = config.ttlMs ?? BACKEND_DEFAULTS.ttlMs
  if (!Number.isInteger(ttlMs) || ttlMs <= 0) {
    throw new LockError('InvalidArgument', 'ttlMs must be a positive integer')
  }
  const pace = paceOf(config.acquisition)
  const startedAt = Date.now()
  const lockId = own
    ? await acquireNatively(own, entry, ttlMs, pace, config, startedAt)
    : await acquireInJs(backend, key, ttlMs, pace, config, startedAt)
  if (!lockId) throw new LockError('Internal', 'Lock acquired but no lockId returned')
  try {
    return await fn()
  } finally {
    try {
      await backend.release({ lockId, signal: config.signal })
    } catch (error) {
      report(config.onReleaseError ?? defaultOnReleaseError, error, lockId, key)
    }
  }
}

/** `lock` bound to `backend`: `(fn, config) => lock(backend, fn, config)`. */
function createAutoLock(backend) {
  return (fn, config) => lock(backend, fn, config)
}

/** syncguard's `createLock(redis, options)`: one backend, and lock() bound to it. */
function createLock(redis, options) {
  const backend = createRedisBackend(redis, options)
  const locked = createAutoLock(backend)
  // Our addition: the backend's stats (README "Stats").
  locked.stats = () => backend.stats()
  return locked
}

module.exports = { lock, createAutoLock, createLock }
