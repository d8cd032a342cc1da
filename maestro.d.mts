// ESM view of maestro.d.ts: the module is the class, as default and by name.
import { DistributedLockService } from './index.js'

export default DistributedLockService
export { DistributedLockService }
export type { LockServiceStatus, Logger, RedisInput, RedlockNodes, ClusterNode, RedisClusterOptions, RedisSentinelOptions } from './index.js'
