import { ExclusiveLock } from './index'

export = ExclusiveLock
