// Type-checked with `tsc --noEmit --strict` by __test__/types.test.js; never executed.
import Redis from 'ioredis'
import {
  DistributedLock,
  LockHandle,
  LockAcquisitionError,
  InvalidLockError,
  LockError,
  type LockInfo,
  type LockOptions,
  type RedlockNodes,
  type RedisClusterOptions,
  type LockStats,
  type LockEvent,
  type RedisSentinelOptions,
} from 'native-redis-lock'
import * as sub from 'native-redis-lock/distributed-lock'

async function tracing(): Promise<void> {
  const spans = new Map<string, number>()
  const onEvent = (event: LockEvent): void => {
    if (event.type === 'acquired') spans.set(`${event.key} ${event.fence}`, event.waitedMs ?? 0)
    if (event.type === 'error') void [event.code, event.call, event.error?.message]
    if (event.type === 'suspended' || event.type === 'resumed') void [event.key, event.fence]
    // @ts-expect-error not an event
    if (event.type === 'acquire') void 0
  }
  const lock = new DistributedLock('memory://', { logger: console, onEvent })
  // @ts-expect-error a logger needs debug, info, warn and error
  new DistributedLock('memory://', { logger: { debug() {} } })
  const stats: LockStats = lock.stats()
  const p99: number = stats.waitMs.p99
  const elocked: number | undefined = stats.errors.ELOCKED
  const ex = new ExclusiveLock({ name: 'app', cache_connection: 'memory://', onEvent, logger: console })
  const service = new DistributedLockService('job', 1000, 'memory://', { onEvent })
  const backend = createRedisBackend('memory://', { onEvent, logger: console })
  const counts = [ex.stats().acquisitions, service.stats().contended, backend.stats().woken, createLock('memory://').stats().handedOver]
  void [p99, elocked, counts]
}
void tracing

function statsOff(): void {
  const enabled: boolean = new DistributedLock('memory://', { stats: false }).stats().enabled
  new ExclusiveLock({ name: 'app', cache_connection: 'memory://', stats: false })
  new DistributedLockService('job', 1000, 'memory://', { stats: false })
  createRedisBackend('memory://', { stats: false })
  createLock('memory://', { stats: true })
  // @ts-expect-error stats is a boolean
  new DistributedLock('memory://', { stats: 'off' })
  void enabled
}
void statsOff

async function main(): Promise<void> {
  const options: LockOptions = { keyPrefix: 'myapp:', defaultTtlMs: 5000, maxRetries: 3, retryDelayMs: 100 }
  const lock = new DistributedLock(new Redis(), options)
  new DistributedLock('redis://localhost:6379/1')
  new DistributedLock({ host: 'localhost', port: 6379, password: 'x', db: 2 })
  new sub.DistributedLock('rediss://cache:6380', { commandTimeoutMs: 1000, connectTimeoutMs: 500 })
  // The restart quarantine on every API (README "Restart quarantine").
  new DistributedLock('redis://localhost:6379', { restartQuarantineMs: 2000 })
  new ExclusiveLock({ name: 'app', cache_connection: 'redis://localhost:6379', restart_quarantine_ms: 2000 })
  new DistributedLockService('job', 1000, 'redis://localhost:6379', { restartQuarantineMs: 2000 })
  createRedisBackend('redis://localhost:6379', { restartQuarantineMs: 2000 })
  // A Redlock: independent masters, each as a single connection is given (clients, URLs, settings).
  const nodes: RedlockNodes = [new Redis(7001), 'redis://b:6379', { host: 'c', port: 6379 }]
  new DistributedLock(nodes, options)
  new sub.DistributedLock(['redis://a', 'redis://b', 'redis://c'] as const)
  // @ts-expect-error each node is one server, not an array
  new DistributedLock([['redis://a'], 'redis://b', 'redis://c'])
  // A Redis Cluster: a URL, its seed nodes, or an ioredis Cluster.
  new DistributedLock('redis+cluster://a:7000,b:7001')
  const seeds: RedisClusterOptions = { cluster: [7000, 'b:7001', { host: 'c', port: 7002 }], password: 'x' }
  new sub.DistributedLock(seeds, options)
  new DistributedLock(new Redis.Cluster([{ host: 'a', port: 7000 }]))
  // @ts-expect-error a cluster's nodes are ports, strings or { host, port }
  new DistributedLock({ cluster: [true] })
  // Sentinel: options with ioredis's names, a URL, or an ioredis client made with sentinels.
  const sentinel: RedisSentinelOptions = { sentinels: [{ host: 's1', port: 26379 }, { host: 's2' }], name: 'mymaster' }
  new DistributedLock(sentinel)
  new sub.DistributedLock({ ...sentinel, sentinelPassword: 'x', password: 'y', db: 1 })
  new DistributedLock('redis+sentinel://s1:26379,s2:26379/mymaster')
  new DistributedLock(new Redis({ sentinels: [{ host: 's1', port: 26379 }], name: 'mymaster' }))
  // @ts-expect-error locks are kept on the master only
  new DistributedLock({ sentinels: [{ host: 's1' }], name: 'mymaster', role: 'slave' })
  new DistributedLock({ ...sentinel, natMap: { '10.0.0.1:6379': { host: 'nat.example', port: 7000 } } })
  // @ts-expect-error a natMap is an object, not a function
  new DistributedLock({ ...sentinel, natMap: () => ({ host: 'nat.example', port: 7000 }) })

  const handle: LockHandle = await lock.acquire('user:123', 10_000)
  const fence: string = handle.fence
  const info: LockInfo = handle.info
  const held: boolean = handle.isHeld && info.isHeld
  const expires: number = info.expiresAt - info.acquiredAt
  await handle.extend(5000)
  await handle.release()
  await handle[Symbol.asyncDispose]()

  const kept = await lock.acquire('leader', 3000, { autoRefresh: true, onLost: (err) => void err.key })
  const doubted = await lock.acquire('doubted', 3000, {
    autoRefresh: true,
    onSuspended: (h) => void (h.suspended && !h.isHeld),
    onResumed: (h) => void h.fence.length,
  })
  const inDoubt: boolean = doubted.suspended
  void inDoubt
  const lostErr: LockLostError = await Promise.race([kept.lost, Promise.reject(new Error('not lost'))])
  const written: boolean = await lock.fencedSet('resource', 'value', kept.fence)
  void [lostErr, written]
  const maybe = await lock.tryAcquire('user:123')
  // @ts-expect-error tryAcquire may resolve null
  maybe.release()
  if (maybe) await maybe.release()

  const controller = new AbortController()
  const waited = await lock.waitForLock('user:123', 5000, undefined, { signal: controller.signal })
  await waited.release()
  const locked: boolean = await lock.isLocked('user:123')

  const n: number = await lock.using('job:1', async (h) => (h.isHeld ? 1 : 0), { ttlMs: 1000, timeoutMs: 200 })
  const s: string = await lock.using('job:2', () => 'sync result')
  const aborted: boolean = await lock.using('job:3', (_h, signal) => signal.aborted || signal.reason instanceof LockLostError)
  void aborted

  try {
    await lock.acquire('x')
  } catch (err) {
    if (err instanceof LockAcquisitionError) {
      const k: string = err.key
      const r: number = err.retriesAttempted
      const c: 'ELOCKED' = err.code
      void [k, r, c]
    } else if (err instanceof InvalidLockError) {
      const c: 'ENOTHELD' = err.code
      void c
    } else if (err instanceof LockError) {
      const c: string = err.code
      void c
    }
  }

  // @ts-expect-error keys are strings
  await lock.acquire(123)
  // @ts-expect-error LockHandle is not constructed by users
  new LockHandle()
  // @ts-expect-error unknown option
  new DistributedLock('redis://x', { keyprefix: 'typo' })

  void [fence, held, expires, locked, n, s]
}

void main

import ExclusiveLock = require('native-redis-lock/exclusive-lock')
import DistributedLockService = require('native-redis-lock/maestro')
import { LockLostError, type LockInspection, DistributedLockService as MainService } from 'native-redis-lock'

async function exclusive(): Promise<void> {
  const lock = new ExclusiveLock({ name: 'app', cache_connection: 'redis://localhost', lock_contents: 'pod-1' })
  lock.on('acquired', (key: string) => void key)
  lock.on('refreshed', ({ key, lock_ttl_ms }) => void [key.length, lock_ttl_ms.toFixed()])
  lock.on('suspended', ({ key }) => void key.length)
  lock.on('resumed', ({ key }) => void key.length)
  lock.on('error', (err) => {
    if (err instanceof LockLostError) void err.key
    const key: string = err.key // the failed release after a loss names its lock too
    const code: string = err.code
    void [key, code]
  })
  // @ts-expect-error unknown event
  lock.on('lost', () => {})
  const won: boolean = await lock.acquire()
  const seen: LockInspection | null = await lock.inspect()
  const fence: string | null = lock.fence
  lock.unref().ref()
  await lock.release()
  // @ts-expect-error name is required
  new ExclusiveLock({ cache_connection: 'redis://localhost' })

  const service = new DistributedLockService('job-lock', 60_000, 'redis://localhost')
  const watched = new DistributedLockService('job-lock', 60_000, 'redis://localhost', {
    onSuspended: (s) => void s.lockKey,
    onResumed: (s) => void s.suspended,
  })
  const doubting: boolean = watched.suspended
  void doubting
  const fromMain: DistributedLockService = new MainService('job-lock', 60_000, 'memory://')
  new ExclusiveLock({ name: 'redlock', cache_connection: ['redis://a', 'redis://b', 'redis://c'] })
  new DistributedLockService('job-lock', 60_000, ['redis://a', new Redis(7002), { url: 'redis://c' }])
  void fromMain
  const got: boolean = await service.acquire(1000, 5000)
  const released: boolean = await service.release()
  const status = service.getStatus()
  const locked: boolean = status.isLocked
  await service.disconnect()
  void [won, seen, fence, got, released, locked, service.getLockKey(), service.getLockTtl()]
}

void exclusive

import {
  createRedisBackend,
  createLock,
  lock as sgLock,
  hasFence,
  getByKeyRaw,
  withTelemetry,
  LockError as SyncguardLockError,
  LOCK_DEFAULTS,
  FENCE_THRESHOLDS,
  type AcquireResult,
  type BackendCapabilities,
  type DecoratedAcquireResult,
  type LockBackend,
  type LockInfo as SyncguardLockInfo,
  type RedisBackendOptions,
} from 'native-redis-lock/syncguard'
import * as sgRedis from 'native-redis-lock/syncguard/redis'

async function syncguard(): Promise<void> {
  const options: RedisBackendOptions = { keyPrefix: 'app', disposeTimeoutMs: 1000, commandTimeoutMs: 2000 }
  const backend = createRedisBackend(new Redis(), options)
  createRedisBackend('redis://localhost:6379/1')
  createRedisBackend('memory://tests')
  createRedisBackend({ host: 'localhost', port: 6379, password: 'x' })
  const evalOnly: sgRedis.SyncguardEvalOnly = { eval: async (_script: string, _numKeys: number, ..._rest: string[]) => 1 }
  createRedisBackend(evalOnly)
  createRedisBackend({ eval: async () => 0 })
  const fromSubpath: LockBackend<sgRedis.RedisCapabilities> = sgRedis.createRedisBackend('rediss://cache:6380')
  // @ts-expect-error an object with neither settings nor an `eval` function
  createRedisBackend({ evaluate: async () => 1 })
  // @ts-expect-error unknown option
  createRedisBackend('redis://x', { keyprefix: 'typo' })

  // Our backend has fences: `fence` needs no hasFence guard, only the `ok` check.
  const result = await backend.acquire({ key: 'job', ttlMs: 1000 })
  if (result.ok) {
    const fence: string = result.fence
    const extended = await result.extend(1000)
    const until: number = extended.ok ? extended.expiresAtMs : 0
    void [fence, until]
  } else {
    const reason: 'locked' = result.reason
    void reason
  }
  {
    await using held = await backend.acquire({ key: 'job', ttlMs: 1000 })
    if (held.ok) void held.lockId
  }
  const decorated: DecoratedAcquireResult<sgRedis.RedisCapabilities> = await fromSubpath.acquire({ key: 'k', ttlMs: 1 })
  await decorated[Symbol.asyncDispose]()

  // LockInfo has `fence` exactly when the capabilities say fencing.
  const info = await backend.lookup({ key: 'job' })
  if (info) {
    const fence: string = info.fence
    void fence
  }
  const unfenced = {} as SyncguardLockInfo<{ supportsFencing: false; timeAuthority: 'client' }>
  // @ts-expect-error no fence without fencing
  void unfenced.fence
  const generic = {} as AcquireResult<BackendCapabilities>
  // @ts-expect-error a backend that may not fence: narrow with hasFence first
  if (generic.ok) void generic.fence
  if (hasFence(generic)) {
    const fence: string = generic.fence
    void fence
  }
  const raw = await getByKeyRaw(backend, 'job')
  const rawKey: string | undefined = raw?.key

  const n: number = await sgLock(backend, async () => 42, {
    key: 'job',
    ttlMs: 5000,
    acquisition: { maxRetries: 3, backoff: 'fixed', jitter: 'none', timeoutMs: 1000 },
    onReleaseError: (err, ctx) => void [err.message, ctx.lockId, ctx.source],
  })
  const s: string = await createLock('redis://x')(() => 'sync', { key: 'k' })
  const observed = withTelemetry(backend, { onEvent: (e) => void e.type, includeRaw: (e) => e.result === 'fail' })
  const observedLocked: boolean = await observed.isLocked({ key: 'k' })
  const err = new SyncguardLockError('AcquisitionTimeout', 'message', { key: 'k' })
  const code: 'AcquisitionTimeout' | 'Internal' | string = err.code
  const retries: number = LOCK_DEFAULTS.maxRetries
  const max: '900000000000000' = FENCE_THRESHOLDS.MAX
  // @ts-expect-error syncguard's LockError takes its code first, and only its codes
  new SyncguardLockError('some message')
  void [rawKey, n, s, observedLocked, code, retries, max]
}

void syncguard
