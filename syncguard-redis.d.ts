// Public types of native-redis-lock/syncguard/redis, the counterpart of `syncguard/redis`.
export {
  createRedisBackend,
  createLock,
  type LockData,
  type RedisBackendOptions,
  type RedisConfig,
  type RedisCapabilities,
  type SyncguardRedisInput,
  type SyncguardEvalOnly,
} from './syncguard'
