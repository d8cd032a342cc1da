'use strict'

const { DistributedLock, LockHandle } = require('./lib/distributed-lock')
const { ExclusiveLock } = require('./lib/exclusive-lock')
const { LockError, LockAcquisitionError, InvalidLockError, LockLostError } = require('./lib/errors')

module.exports = {
  DistributedLock,
  LockHandle,
  ExclusiveLock,
  LockError,
  LockAcquisitionError,
  InvalidLockError,
  LockLostError,
}
