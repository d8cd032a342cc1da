import { DistributedLockService } from './index'

export = DistributedLockService
