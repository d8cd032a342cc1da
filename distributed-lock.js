'use strict'

// Same module shape as @lilith/distributed-lock.
const { DistributedLock, LockHandle, LockError, LockAcquisitionError, InvalidLockError } = require('./index.js')

module.exports = { DistributedLock, LockHandle, LockError, LockAcquisitionError, InvalidLockError }
