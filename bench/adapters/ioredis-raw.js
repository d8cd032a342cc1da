'use strict'

// The JavaScript ceiling: no lock library, just ioredis. SET key token NX PX ttl to acquire,
// a compare-and-delete script (EVALSHA via defineCommand) to release, a 10 ms poll to wait.
const { randomUUID } = require('node:crypto')
const { connect } = require('../lib/redis')
const { sleep } = require('../lib/util')

const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

module.exports = {
  name: 'ioredis (raw SET NX + EVALSHA)',
  kind: 'baseline',
  package: 'ioredis',
  async create({ port }) {
    const client = await connect(port)
    client.defineCommand('benchRelease', { numberOfKeys: 1, lua: RELEASE })
    const acquire = async (key, ttlMs) => {
      const token = randomUUID()
      return (await client.set(key, token, 'PX', ttlMs, 'NX')) === 'OK' ? { key, token } : null
    }
    return {
      acquire,
      release: ({ key, token }) => client.benchRelease(key, token),
      async waitAcquire(key, ttlMs) {
        const deadline = Date.now() + 10_000
        for (;;) {
          const handle = await acquire(key, ttlMs)
          if (handle) return handle
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${key}`)
          await sleep(10)
        }
      },
      close: () => client.quit(),
    }
  },
}
