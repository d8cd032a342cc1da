'use strict'

/** Base class of every error this package raises about a lock; `code` is stable. */
class LockError extends Error {
  constructor(message, code, options) {
    super(message, options)
    this.name = 'LockError'
    this.code = code
  }
}

/** The lock stayed held by someone else through every retry, or until the wait timed out. */
class LockAcquisitionError extends LockError {
  constructor(key, retriesAttempted, message) {
    super(message ?? `Failed to acquire lock "${key}" after ${retriesAttempted} retries`, 'ELOCKED')
    this.name = 'LockAcquisitionError'
    this.key = key
    this.retriesAttempted = retriesAttempted
  }
}

/** The handle no longer owns its lock: released, expired, or taken over by another holder. */
class InvalidLockError extends LockError {
  constructor(key, message) {
    super(message ?? `Lock "${key}" is no longer held`, 'ENOTHELD')
    this.name = 'InvalidLockError'
    this.key = key
  }
}

/** An auto-refreshed lock is gone: deleted, taken over, or unconfirmed until its TTL ran out. */
class LockLostError extends LockError {
  constructor(key, message) {
    super(message ?? `Lock "${key}" was lost`, 'ELOST')
    this.name = 'LockLostError'
    this.key = key
  }
}

function invalidArgument(Class, argument, message) {
  const err = new Class(message)
  err.code = 'EINVAL'
  err.argument = argument
  return err
}

// The native layer makes its errors itself (src/binding/error.rs): an Error, TypeError or
// RangeError with a stable `code`, plus `argument` (EINVAL), `retriesAttempted` (ELOCKED)
// and `key`, marked by a non-enumerable `nativeRedisLock` so that a user's error that
// happens to carry one of these codes passes through untouched.

/** Marks an error made as a native call settled: no caller's frame is on the stack then. */
const SETTLED = Symbol('settled')

/** The error class users match on, for an error that a native call settled with. */
function settledError(err) {
  const error = fromNative(err)
  if (error !== null && typeof error === 'object' && Object.isExtensible(error)) {
    Object.defineProperty(error, SETTLED, { value: true, configurable: true })
  }
  return error
}

/**
 * Turns an error from the native binding into the error class users match on. One that a
 * native call settled with gets the stack of the first public method that catches it after
 * its `await`: V8 then adds the frames of the async functions awaiting it, the caller's
 * among them. Only failures pay for it.
 */
function fromNative(err, key) {
  if (err !== null && typeof err === 'object' && err[SETTLED] === true) {
    delete err[SETTLED]
    Error.captureStackTrace(err, fromNative)
    return err
  }
  if (err === null || typeof err !== 'object' || err.nativeRedisLock !== true) return err
  const lockKey = err.key !== undefined ? err.key : key
  switch (err.code) {
    case 'EINVAL':
      return invalidArgument(err instanceof RangeError ? RangeError : TypeError, err.argument, err.message)
    case 'ELOCKED':
      return new LockAcquisitionError(lockKey, err.retriesAttempted)
    case 'ENOTHELD':
      return new InvalidLockError(lockKey)
    case 'ELOST':
      return new LockLostError(lockKey, err.message)
    default:
      return new LockError(err.message, err.code)
  }
}

module.exports = { LockError, LockAcquisitionError, InvalidLockError, LockLostError, invalidArgument, fromNative, settledError }
