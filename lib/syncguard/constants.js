'use strict'

// syncguard 2.5.2's exported constants, with its values. They are plain objects and not frozen,
// as syncguard's are (its `as const` is a type, not `Object.freeze`): `lock()` reads
// LOCK_DEFAULTS and BACKEND_DEFAULTS at each call, so a program that assigns to them changes
// the defaults, and ours must let it.

/** Longest key accepted, in UTF-8 bytes after NFC normalisation, before any prefix. */
const MAX_KEY_LENGTH_BYTES = 512

/** Longest storage key, in bytes, per backend kind. */
const BACKEND_LIMITS = { REDIS: 1000, POSTGRES: 1700, FIRESTORE: 1500 }

/** Bytes kept free for derived keys: Redis's index key adds ":id:" and a 22-char lockId. */
const RESERVE_BYTES = { REDIS: 26, POSTGRES: 0, FIRESTORE: 0 }

/** A backend call's default TTL. */
const BACKEND_DEFAULTS = { ttlMs: 30000 }

/** `lock()`'s retry defaults. */
const LOCK_DEFAULTS = {
  maxRetries: 10,
  retryDelayMs: 100,
  timeoutMs: 5000,
  backoff: 'exponential',
  jitter: 'equal',
}

/** Fences are 15-digit strings compared as strings: past MAX a backend fails, past WARN it warns. */
const FENCE_THRESHOLDS = { MAX: '900000000000000', WARN: '090000000000000' }

module.exports = {
  MAX_KEY_LENGTH_BYTES,
  BACKEND_LIMITS,
  RESERVE_BYTES,
  BACKEND_DEFAULTS,
  LOCK_DEFAULTS,
  FENCE_THRESHOLDS,
}
