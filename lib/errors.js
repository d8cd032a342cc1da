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

// The native layer encodes errors as "[CODE detail...] message" (see src/binding/error.rs).
const NATIVE = /^\[([A-Z]+)((?: [^\] ]+)*)\] ([\s\S]*)$/

/** Turns an error from the native binding into the error class users match on. */
function fromNative(err, key) {
  const match = typeof err?.message === 'string' ? NATIVE.exec(err.message) : null
  if (!match) return err
  const [, code, rest, message] = match
  const detail = rest.trim().split(' ')
  switch (code) {
    case 'EINVAL':
      return invalidArgument(detail[0] === 'RangeError' ? RangeError : TypeError, detail[1], message)
    case 'ELOCKED':
      return new LockAcquisitionError(key, Number(detail[0]))
    case 'ENOTHELD':
      return new InvalidLockError(key)
    case 'ELOST':
      return new LockLostError(key, message)
    default:
      return new LockError(message, code)
  }
}

module.exports = { LockError, LockAcquisitionError, InvalidLockError, LockLostError, invalidArgument, fromNative }
