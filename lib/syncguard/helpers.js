'use strict'

// syncguard's diagnostic helpers: lookups by key or lockId, their raw variants, ownership and
// fence checks, the sanitised lock info backends return, and two small pieces backends share
// (the fence warning, the abort check before dispatch).

const { FENCE_THRESHOLDS } = require('./constants')
const { hashKey } = require('./keys')
const { LockError } = require('./errors')

/**
 * Where a backend keeps the unhashed `{ key, lockId }` on the LockInfo it returns. A registered
 * symbol, as syncguard's is, so that syncguard's own getByKeyRaw works on our backend and ours
 * on syncguard's.
 */
const RAW_DATA = Symbol.for('syncguard.rawData')

/** Puts `raw` (`{ key, lockId }`) on `lockInfo` for the raw lookups; returns `lockInfo`. */
function attachRawData(lockInfo, raw) {
  lockInfo[RAW_DATA] = raw
  return lockInfo
}

/** Whether `result` is a won acquisition carrying a (non-empty) fence. */
function hasFence(result) {
  return result.ok && 'fence' in result && !!result.fence
}

/**
 * What a lookup may show: hashes instead of the key and lockId, the two times, and the fence
 * when the backend has fences and the record holds one.
 */
function sanitizeLockInfo(raw, capabilities) {
  const info = {
    keyHash: hashKey(raw.key),
    lockIdHash: hashKey(raw.lockId),
    expiresAtMs: raw.expiresAtMs,
    acquiredAtMs: raw.acquiredAtMs,
  }
  if (capabilities.supportsFencing && raw.fence) info.fence = raw.fence
  return info
}

// The caller's options are spread after the query, as syncguard spreads them: an option named
// `key` or `lockId` replaces the one given.
function getByKey(backend, key, opts) {
  return backend.lookup({ key, ...opts })
}

function getById(backend, lockId, opts) {
  return backend.lookup({ lockId, ...opts })
}

/**
 * A lookup whose answer also carries the raw key and lockId: those the backend attached, or
 * the one queried and a placeholder for the other when it attached none.
 */
async function lookupRaw(backend, query) {
  const info = await backend.lookup(query)
  if (!info) return null
  const raw = info[RAW_DATA]
  if (raw) return { ...info, key: raw.key, lockId: raw.lockId }
  if ('key' in query) {
    return { ...info, key: query.key, lockId: '[backend does not provide raw lockId]' }
  }
  return { ...info, key: '[backend does not provide raw key]', lockId: query.lockId }
}

function getByKeyRaw(backend, key, opts) {
  return lookupRaw(backend, { key, ...opts })
}

function getByIdRaw(backend, lockId, opts) {
  return lookupRaw(backend, { lockId, ...opts })
}

/** Whether `lockId` still holds its lock, by a lookup. */
function owns(backend, lockId) {
  return backend.lookup({ lockId }).then((info) => info !== null)
}

/** The console warning a backend gives when a fence passes FENCE_THRESHOLDS.WARN. */
function logFenceWarning(fence, key) {
  console.warn(
    `[SyncGuard] Fence counter approaching limit: fence=${fence}, key=${key}, max=${FENCE_THRESHOLDS.MAX}`,
  )
}

/** Throws Aborted when `signal` is already aborted: backends look once, before dispatch. */
function checkAborted(signal) {
  if (signal?.aborted) throw new LockError('Aborted', 'Operation aborted by signal')
}

/** A promise settled after `ms` ms: the pause custom backends and tests use between tries. */
function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

module.exports = {
  RAW_DATA,
  attachRawData,
  hasFence,
  sanitizeLockInfo,
  getByKey,
  getById,
  getByKeyRaw,
  getByIdRaw,
  owns,
  logFenceWarning,
  checkAborted,
  delay,
}
