'use strict'

// syncguard's withTelemetry: a backend whose five calls each report one event after they
// return. Keys and lockIds appear hashed; raw only when `includeRaw` allows.

const { hashKey } = require('./keys')
const { FAILURE_REASON } = require('./failure-reason')

/**
 * `backend` wrapped so that each call emits `{ type, keyHash | lockIdHash, result, reason? }`
 * to `onEvent` once it settles successfully (a call that throws emits nothing). A throwing
 * `onEvent` is ignored; `includeRaw` is a boolean or a predicate of the event, a throwing
 * predicate counting as false (when in doubt, redact).
 */
function withTelemetry(backend, options) {
  const emit = (event) => {
    try {
      options.onEvent(event)
    } catch {
      // Telemetry must never break a lock call.
    }
  }
  const wantsRaw = (event) => {
    if (typeof options.includeRaw === 'function') {
      try {
        return options.includeRaw(event)
      } catch {
        return false
      }
    }
    return options.includeRaw ?? false
  }
  // The hidden reason a release or extend failed, when the backend left one.
  const addReason = (event, result) => {
    const reason = result.ok ? undefined : result[FAILURE_REASON]?.reason
    if (reason) event.reason = reason
  }
  const byKey = (type, key, ok) => ({ type, keyHash: hashKey(key), result: ok ? 'ok' : 'fail' })
  const byLockId = (type, lockId, ok) => ({
    type,
    lockIdHash: hashKey(lockId),
    result: ok ? 'ok' : 'fail',
  })

  async function mutation(type, opts, call) {
    const result = await call(opts)
    const event = byLockId(type, opts.lockId, result.ok)
    addReason(event, result)
    if (wantsRaw(event)) event.lockId = opts.lockId
    emit(event)
    return result
  }

  // A lookup by key reports a keyHash (raw: the key), one by lockId a lockIdHash.
  async function lookupBy(field, opts) {
    const info = await backend.lookup(opts)
    const found = info !== null
    const event =
      field === 'key' ? byKey('lookup', opts.key, found) : byLockId('lookup', opts.lockId, found)
    if (wantsRaw(event)) event[field] = opts[field]
    emit(event)
    return info
  }

  return {
    async acquire(opts) {
      const result = await backend.acquire(opts)
      const event = byKey('acquire', opts.key, result.ok)
      if (!result.ok) event.reason = result.reason
      if (wantsRaw(event)) {
        event.key = opts.key
        if (result.ok) event.lockId = result.lockId
      }
      emit(event)
      return result
    },
    release(opts) {
      return mutation('release', opts, (o) => backend.release(o))
    },
    extend(opts) {
      return mutation('extend', opts, (o) => backend.extend(o))
    },
    async isLocked(opts) {
      const locked = await backend.isLocked(opts)
      const event = byKey('isLocked', opts.key, locked)
      if (wantsRaw(event)) event.key = opts.key
      emit(event)
      return locked
    },
    lookup(opts) {
      return lookupBy('key' in opts ? 'key' : 'lockId', opts)
    },
    capabilities: backend.capabilities,
  }
}

module.exports = { withTelemetry }
