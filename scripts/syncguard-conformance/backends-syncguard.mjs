// The fixture for `--target syncguard`: syncguard's own createRedisBackend (transpiled from the
// checkout into ../../redis) on the harness's private redis-server. Written here in place of
// its test/fixtures/backends.ts, which talks to localhost:6379 (never used by this project).
import { createRedisBackend } from '../../redis/index.js'
import { fixtureModule, redisServerFixture } from './redis-fixture.js'

export const backends = [redisServerFixture('syncguard on redis-server', createRedisBackend)]
export const { getEnabledBackends, getAvailableBackends, setupBackend } = fixtureModule(backends)
