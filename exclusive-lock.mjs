import ExclusiveLock from './exclusive-lock.js'

export default ExclusiveLock
export { ExclusiveLock }
