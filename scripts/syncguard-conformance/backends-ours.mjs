// The fixture for `--target ours`: native-redis-lock's `syncguard` entry (SG_CONF_ENTRY), twice:
// on the harness's private redis-server (an ioredis client handed to our createRedisBackend,
// as a syncguard user does) and on the embedded memory:// backend. Both are of kind "redis" so
// syncguard's Redis timings apply. Written here in place of its test/fixtures/backends.ts.
import { createRequire } from 'node:module'
import { PREFIX, fixtureModule, redisServerFixture } from './redis-fixture.js'

const require = createRequire(import.meta.url)
const { createRedisBackend } = require(process.env.SG_CONF_ENTRY)
const native = require(process.env.SG_CONF_NATIVE)

let memories = 0
const onMemory = {
  name: 'native-redis-lock on memory://',
  kind: 'redis',
  available: async () => true,
  async setup() {
    const url = `memory://syncguard-conformance-${process.pid}-${++memories}`
    // The keyspace's own command door (the tests' memory client uses it too): KEYS, then DEL.
    const run = (...args) => JSON.parse(native.memoryCommand(url, args.map((a) => Buffer.from(String(a)))))
    const clearMemory = async () => {
      const reply = run('KEYS', '*')
      const keys = (Array.isArray(reply) ? reply : []).map((k) => Buffer.from(k.bulk, 'base64').toString())
      if (keys.length > 0) run('DEL', ...keys)
    }
    return {
      cleanup: clearMemory,
      teardown: async () => {},
      createBackend: () => createRedisBackend(url, { keyPrefix: PREFIX }),
    }
  },
}

export const backends = [redisServerFixture('native-redis-lock on redis-server', createRedisBackend), onMemory]
export const { getEnabledBackends, getAvailableBackends, setupBackend } = fixtureModule(backends)
