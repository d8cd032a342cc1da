'use strict'

const { MAX_KEY_LENGTH_BYTES } = require('./constants')
const { LockError } = require('./errors')

const LOCK_ID = /^[A-Za-z0-9_-]{22}$/
const utf8 = new TextEncoder()

/**
 * Throws InvalidArgument unless `lockId` is 22 base64url characters (what generateLockId
 * makes). The message quotes the value, or "empty/null" for a falsy one, as syncguard's does.
 */
function validateLockId(lockId) {
  if (!lockId || typeof lockId !== 'string' || !LOCK_ID.test(lockId)) {
    throw new LockError(
      'InvalidArgument',
      `Invalid lockId format. Expected 22 base64url characters, got: ${lockId || 'empty/null'}`,
    )
  }
}

/**
 * The key in NFC form, so that "café" typed two ways names one lock; throws InvalidArgument for
 * a non-string, an empty key, or one over MAX_KEY_LENGTH_BYTES UTF-8 bytes once normalised.
 */
function normalizeAndValidateKey(key) {
  if (typeof key !== 'string') throw new LockError('InvalidArgument', 'Key must be a string')
  if (key.length === 0) throw new LockError('InvalidArgument', 'Key must not be empty')
  const normalized = key.normalize('NFC')
  if (utf8.encode(normalized).length > MAX_KEY_LENGTH_BYTES) {
    throw new LockError(
      'InvalidArgument',
      `Key exceeds maximum length of ${MAX_KEY_LENGTH_BYTES} bytes after normalization`,
    )
  }
  return normalized
}

module.exports = { validateLockId, normalizeAndValidateKey }
