import lib from './index.js'

export const {
  DistributedLock,
  LockHandle,
  ExclusiveLock,
  DistributedLockService,
  LockError,
  LockAcquisitionError,
  InvalidLockError,
  LockLostError,
} = lib
export default lib
