'use strict'

const { DistributedLock, LockHandle } = require('./lib/distributed-lock')
const { ExclusiveLock } = require('./lib/exclusive-lock')
const { DistributedLockService } = require('./lib/lock-service')
const { LockError, LockAcquisitionError, InvalidLockError, LockLostError } = require('./lib/errors')

module.exports = {
  DistributedLock,
  LockHandle,
  ExclusiveLock,
  DistributedLockService,
  LockError,
  LockAcquisitionError,
  InvalidLockError,
  LockLostError,
}
