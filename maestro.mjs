import DistributedLockService from './maestro.js'

export default DistributedLockService
export { DistributedLockService }
