// ESM view of exclusive-lock.d.ts: the module is the class, as default and by name.
import { ExclusiveLock } from './index.js'

export default ExclusiveLock
export { ExclusiveLock }
export type { ExclusiveLockOptions, ExclusiveLockEvents, LockInspection, Logger, RedisInput, RedlockNodes, ClusterNode, RedisClusterOptions, RedisSentinelOptions } from './index.js'
