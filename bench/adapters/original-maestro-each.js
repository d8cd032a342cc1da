'use strict'

// The stand-in of maestro's DistributedLockService (original-maestro.js) with a new service
// for every acquisition on the one shared client. (a) and (b) only.
process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS ??= '10'
process.env.MO_BACKOFF_MAX_DELAY_MS ??= '10'
const { connect } = require('../lib/redis')
const { StandInLockService } = require('./original-maestro')

module.exports = {
  name: 'original: maestro DistributedLockService (stand-in), one per acquisition',
  kind: 'original',
  package: 'ioredis',
  scenarios: ['a', 'b'],
  async create({ port }) {
    const client = await connect(port)
    const onLost = () => {}
    return {
      async acquire(key, ttlMs) {
        const lock = new StandInLockService(client, key, ttlMs, onLost)
        return (await lock.acquire(ttlMs)) ? lock : null
      },
      release: (lock) => lock.release(),
      close: () => client.quit(),
    }
  },
}
