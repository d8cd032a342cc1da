import lib from './index.js'

export const {
  DistributedLock,
  LockHandle,
  ExclusiveLock,
  LockError,
  LockAcquisitionError,
  InvalidLockError,
  LockLostError,
} = lib
export default lib
