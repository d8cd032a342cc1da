// One fixture of kind "redis" on the harness's private redis-server (SG_CONF_PORT): an ioredis
// client (SG_CONF_IOREDIS) with the key prefix of syncguard's own fixture, cleared by KEYS +
// DEL before the tests and at each cleanup(), handed to `create(client, { keyPrefix })`.
import { createRequire } from 'node:module'

const Redis = createRequire(import.meta.url)(process.env.SG_CONF_IOREDIS)
export const PREFIX = 'syncguard:test:'

async function clear(redis) {
  const keys = await redis.keys(`${PREFIX}*`)
  if (keys.length > 0) await redis.del(...keys)
}

export function redisServerFixture(name, create) {
  return {
    name,
    kind: 'redis',
    available: async () => true,
    async setup() {
      const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.SG_CONF_PORT), lazyConnect: true, maxRetriesPerRequest: 3 })
      await redis.connect()
      await clear(redis)
      return {
        cleanup: () => clear(redis),
        teardown: async () => {
          await redis.quit()
        },
        createBackend: () => create(redis, { keyPrefix: PREFIX }),
      }
    },
  }
}

/** What syncguard's test/fixtures/backends.ts exports, over `backends`. */
export function fixtureModule(backends) {
  return {
    getEnabledBackends: () => backends,
    getAvailableBackends: async () => backends,
    async setupBackend(fixture) {
      const result = await fixture.setup()
      return { name: fixture.name, kind: fixture.kind, backend: result.createBackend(), cleanup: result.cleanup, teardown: result.teardown }
    },
  }
}
