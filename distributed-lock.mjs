import lib from './distributed-lock.js'

export const { DistributedLock, LockHandle, LockError, LockAcquisitionError, InvalidLockError } = lib
export default lib
