// The fixture for `--target ours`: native-redis-lock's `syncguard` entry (SG_CONF_ENTRY, its ESM file), twice:
// on the harness's private redis-server (an ioredis client handed to our createRedisBackend,
// as a syncguard user does) and on the embedded memory:// backend. Both are of kind "redis" so
// syncguard's Redis timings apply. Written here in place of its test/fixtures/backends.ts.
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { PREFIX, fixtureModule, redisServerFixture } from './redis-fixture.js'

const { createRedisBackend } = await import(pathToFileURL(process.env.SG_CONF_ENTRY).href)
const native = createRequire(import.meta.url)(process.env.SG_CONF_NATIVE)

let memories = 0
const onMemory = {
  name: 'native-redis-lock on memory://',
  kind: 'redis',
  available: async () => true,
  async setup() {
    const url = `memory://syncguard-conformance-${process.pid}-${++memories}`
    // The keyspace is this fixture's alone: FLUSHDB through its command door (as the tests'
    // memory client sends commands) clears it.
    const clearMemory = async () => {
      const reply = JSON.parse(native.memoryCommand(url, [Buffer.from('FLUSHDB')]))
      if (reply.status !== 'OK') throw new Error(`FLUSHDB on ${url}: ${JSON.stringify(reply)}`)
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
