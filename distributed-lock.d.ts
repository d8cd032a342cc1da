export {
  DistributedLock,
  LockHandle,
  LockError,
  LockAcquisitionError,
  InvalidLockError,
  type LockOptions,
  type LockInfo,
  type AcquireOptions,
  type UsingOptions,
  type RedisInput,
  type RedlockNodes,
  type RedisSentinelOptions,
} from './index'
