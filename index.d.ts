// Public types of native-redis-lock. Hand-written: the generated binding.d.ts is private.

import { EventEmitter } from 'node:events'

/** Anything with an ioredis-like `options` object (ioredis `Redis`). */
export interface IoredisLike {
  options: object
  status: string
  sendCommand(...args: never[]): unknown
}

/** A node-redis v4+ client (`createClient()`). */
export interface NodeRedisLike {
  options?: object
  isOpen: boolean
  sendCommand(...args: never[]): unknown
}

/** TLS settings, in the shape ioredis and node-redis take them. */
export interface TlsOptions {
  /** CA certificate(s), PEM; without it the system's roots are used. */
  ca?: string | Buffer | Array<string | Buffer>
  /** Client certificate and key, PEM, when the server requires client certificates. */
  cert?: string | Buffer
  key?: string | Buffer
  /** Must equal the host when given (the certificate is always checked against the host). */
  servername?: string
  /** `false` turns certificate checking off. */
  rejectUnauthorized?: boolean
}

/** Connection settings, when no client is passed. */
export interface RedisConnectionOptions {
  /** `redis://[user:pass@]host[:port][/db]`, `rediss://...` (TLS), `unix:///path` or `redis+sentinel://...`. */
  url?: string
  host?: string
  port?: number
  /** Unix socket path; wins over host and port. */
  path?: string
  /** Connect with TLS; never falls back to plain text. */
  tls?: boolean | TlsOptions
  db?: number
  username?: string
  password?: string
}

/** A node of a Redis Cluster: a port on localhost, `'host:port'`, `'redis://host:port'`, or `{ host, port }`. */
export type ClusterNode = number | string | { host?: string; port?: number }

/**
 * A Redis Cluster, found from some of its nodes (README "Scaling out: Redis Cluster"): we
 * then connect to the nodes the cluster names. Database 0 only.
 */
export interface RedisClusterOptions {
  cluster: readonly ClusterNode[]
  /**
   * ioredis's `natMap`: a node the cluster announces at the key `'host:port'` is reached at
   * the address given (port 6379 when absent). An object only, not a function.
   */
  natMap?: { readonly [announced: string]: { host: string; port?: number } }
  /** Every node's credentials. */
  username?: string
  password?: string
  /** TLS to every node. */
  tls?: boolean | TlsOptions
}

/** A node-redis cluster (`createCluster()`), read once it is connected. */
export interface NodeRedisClusterLike {
  masters: ReadonlyArray<{ host: string; port: number }>
  nodeByAddress: Map<string, unknown>
  isOpen: boolean
  sendCommand(...args: never[]): unknown
}

/**
 * A master found through Redis Sentinel (README "Scaling out: Sentinel"), with ioredis's
 * option names; also `redis+sentinel://[user:pass@]host:port,host:port/<name>[/db]`, or an
 * ioredis client made with `sentinels`. Failovers are followed.
 */
export interface RedisSentinelOptions {
  /** The sentinels to ask (port 26379 when absent). */
  sentinels: ReadonlyArray<{ host: string; port?: number }>
  /** The name of the master the sentinels watch. */
  name: string
  /** Only `'master'`: locks are never taken on a replica. */
  role?: 'master'
  /** The sentinels' own credentials (`username`/`password` are the master's). */
  sentinelUsername?: string
  sentinelPassword?: string
  /** TLS for the master and the sentinels alike: give both or neither. */
  tls?: boolean | TlsOptions
  sentinelTLS?: boolean | TlsOptions
  /**
   * ioredis's `natMap`: a master the sentinels announce at the key `'host:port'` is reached
   * at the address given (port 6379 when absent). An object only, not a function.
   */
  natMap?: { readonly [announced: string]: { host: string; port?: number } }
  db?: number
  username?: string
  password?: string
}

/**
 * An ioredis client (`Redis` or `Cluster`) or a node-redis client or cluster (only their
 * settings are read), a URL (`redis+cluster://h:p,h:p` for a cluster,
 * `redis+sentinel://h:p,h:p/<name>` for a Sentinel set), or settings.
 *
 * Every connection made in a process whose environment has `NATIVE_REDIS_LOCK_WATCH=off` keeps
 * out of `npx native-redis-lock watch` (it never subscribes to its requests, so never tells
 * anyone its lock key names); `on` or unset answers, and every other value makes each
 * constructor throw `EINVAL` naming the variable (README "Command line", `watch`).
 */
export type RedisInput =
  | IoredisLike
  | NodeRedisLike
  | NodeRedisClusterLike
  | RedisConnectionOptions
  | RedisClusterOptions
  | RedisSentinelOptions
  | string

/**
 * Independent Redis masters for a Redlock (README "Scaling out: Redlock"): at least 3, each
 * read as a single `RedisInput`; a lock is held when a majority of them granted it.
 */
export type RedlockNodes = readonly RedisInput[]

export interface LockOptions {
  /** Prefix of every lock key. Default `'lock:'`. */
  keyPrefix?: string
  /** TTL used when a call passes none, in ms. Default 30000. */
  defaultTtlMs?: number
  /** First retry delay of `acquire` (then doubled each retry), and the poll interval of `waitForLock`, in ms. Default 100. */
  retryDelayMs?: number
  /** Retries of `acquire` after the first attempt. Default 0. */
  maxRetries?: number
  /** Bound on opening the connection, in ms. Default 5000. */
  connectTimeoutMs?: number
  /** Bound on every Redis call, in ms. Default 5000. */
  commandTimeoutMs?: number
  /**
   * Waiters (`waitForLock`, `acquire` with retries, `using` with a timeout) get each lock in
   * the order they asked for it, across processes, and no attempt gets ahead of them. Every
   * user of a key must agree on it. Default false.
   */
  fair?: boolean
  /**
   * A waiter of this instance that a release of its own JS thread hands the lock to starts
   * as the handover is sent, on the releaser's lease, before Redis confirms it (faster
   * handovers; for up to a round trip Redis still names the previous holder). Default false:
   * an acquisition resolves once Redis holds the new holder's token.
   */
  lendOnHandover?: boolean
  /**
   * How long each key's fence counter is kept after its lock's last use, in ms; a counter
   * that expired starts again from 1. 0 or Infinity: forever. Default 7 days.
   */
  fenceRetentionMs?: number
  /** Count what its calls do for `stats()`; false keeps every count at zero (README "Stats"). Default true. */
  stats?: boolean
  /**
   * A release gives the lock to the next waiting process, which holds it with no attempt of
   * its own (README "Grants across processes"). One Redis or Sentinel with RESP3; elsewhere
   * ignored. Default false.
   */
  crossProcessGrants?: boolean
  /**
   * No lock is given on a Redis server restarted, failed over, flushed (noticed by new
   * connections only) or first met less than this many ms ago (README "Restart quarantine"):
   * with it, holders are told before anyone else can take their locks. A whole number of ms;
   * 0 (the default) turns it off and sends nothing for it. On a Redlock a gate per node (a node
   * in quarantine grants nothing), on a Cluster a gate per master; ignored by memory://. A connection of its own; first attempts skip the JS thread's socket.
   */
  restartQuarantineMs?: number
  /** Logs each event at its level (README "Tracing"). Default: silent. */
  logger?: TracingLogger
  /** Told of each event (README "Tracing"); its own native lock, so only this instance's events. */
  onEvent?: OnLockEvent
}

/** What `stats()` answers: what an API object's calls have done since it was made. */
export interface LockStats {
  /** False when made with `stats: false` (or where nothing of ours counts): every count is then 0. */
  enabled: boolean
  /** Locks won. */
  acquisitions: number
  /** Attempts that found the lock held by someone else. */
  contended: number
  /** Waits a release woke (the waiter then tried again). */
  woken: number
  /** Waits a release of this process ended by handing the lock over, with no attempt of their own. */
  handedOver: number
  /** Refreshes Redis confirmed: the watchdog's, and `extend()`. */
  refreshes: number
  /** Held locks found gone, or no longer confirmable, by the watchdog. */
  lost: number
  /** Acquisitions that ended in an error, by code (only the codes seen). */
  errors: Partial<Record<LockErrorCode, number>>
  /** From asking for a lock to holding it, in ms, from a fixed log-linear histogram (within 12.5%). */
  waitMs: { p50: number; p99: number; max: number }
}

/** The events an `onEvent` hook is given (README "Tracing"). */
export type LockEventType = 'acquired' | 'contended' | 'woken' | 'handed-over' | 'refreshed' | 'released' | 'lost' | 'suspended' | 'resumed' | 'error'

/** What every event has: the API that saw it, the lock's key (as the user named it), when. */
export interface LockEventBase {
  type: LockEventType
  api: 'DistributedLock' | 'ExclusiveLock' | 'DistributedLockService' | 'syncguard'
  /** Absent where the call names no key (syncguard's release and extend: `lockId`). */
  key?: string
  /** `Date.now()` when it was told. */
  at: number
}

/** One event, by `type` (README "Tracing"). `fence` is the hold's fencing token where the API has one. */
export type LockEvent =
  | (LockEventBase & { type: 'acquired'; fence?: string; waitedMs: number })
  | (LockEventBase & { type: 'contended' | 'woken' | 'handed-over' })
  | (LockEventBase & { type: 'refreshed'; fence?: string; ttlMs?: number; lockId?: string })
  | (LockEventBase & { type: 'released'; fence?: string; heldMs?: number; lockId?: string })
  | (LockEventBase & { type: 'suspended' | 'resumed'; fence?: string })
  | (LockEventBase & { type: 'lost'; fence?: string; code?: string; error: Error })
  | (LockEventBase & { type: 'error'; call: 'acquire' | 'release' | 'extend' | 'lock'; code?: string; error: Error })

/** A hook told of every event; one that throws is logged at `error` and breaks nothing. */
export type OnLockEvent = (event: LockEvent) => void

/** A pino-, winston- or console-shaped logger: each event is logged at its level (README "Tracing"). */
export interface TracingLogger {
  debug(...args: unknown[]): void
  info(...args: unknown[]): void
  warn(...args: unknown[]): void
  error(...args: unknown[]): void
}

export interface RefreshOptions {
  /** Keep the lock alive on the native watchdog (refresh every TTL/3) until released or lost. */
  autoRefresh?: boolean
  /** With `autoRefresh`: called once when the lock is lost. */
  onLost?: (err: LockLostError) => void
  /**
   * With `autoRefresh`: called the moment the connection to Redis drops; the lock is in doubt
   * (`isHeld` false, `suspended` true) until a refresh confirms it (`onResumed`) or finds it
   * gone (`onLost`).
   */
  onSuspended?: (handle: LockHandle) => void
  /** With `autoRefresh`: after `onSuspended`, a refresh confirmed the lock is still ours. */
  onResumed?: (handle: LockHandle) => void
}

export interface AcquireOptions extends RefreshOptions {
  /** Stops retrying or waiting; the promise rejects with `signal.reason`. */
  signal?: AbortSignal
}

export interface UsingOptions extends AcquireOptions {
  ttlMs?: number
  /** Wait up to this long for the lock (as `waitForLock`); without it, `acquire`'s retries apply. */
  timeoutMs?: number
}

export interface LockInfo {
  key: string
  token: string
  /** Epoch ms when the winning request was sent (Redis granted it no earlier): `expiresAt - acquiredAt` is the TTL granted, until an extend. */
  acquiredAt: number
  /** Epoch ms by which the lock expires at the latest (counted from when the request was sent). */
  expiresAt: number
  isHeld: boolean
  /** Fencing token: strictly increasing per key, 15-digit zero-padded decimal. */
  fence: string
}

export declare class LockHandle {
  private constructor()
  readonly key: string
  readonly token: string
  /** Fencing token: strictly increasing per key, 15-digit zero-padded decimal. */
  readonly fence: string
  /** Local state: not released, not past its TTL by a conservative monotonic clock, and not in doubt (`suspended`). */
  readonly isHeld: boolean
  /**
   * The connection dropped and nothing has confirmed the lock since: with `autoRefresh` a
   * refresh (then `onResumed`, or `onLost`), without it this handle's own `extend()`.
   */
  readonly suspended: boolean
  readonly info: LockInfo
  /** With `autoRefresh`: resolves with a LockLostError when the lock is lost; pending otherwise. */
  readonly lost: Promise<LockLostError>
  /**
   * Deletes the lock if it is still ours. Releasing again is a no-op.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, `EAUTH`, `ENOPERM` or `EREDIS` when Redis
   *   could not be asked; the lock then expires with its TTL.
   * @example
   * const handle = await lock.acquire('report', 30_000)
   * try {
   *   await writeReport(handle.fence)
   * } finally {
   *   await handle.release()
   * }
   */
  release(): Promise<void>
  /**
   * Adds `additionalMs` to the lock's remaining TTL.
   * @throws {InvalidLockError} `ENOTHELD` when the lock was released, expired or taken over.
   * @throws {TypeError | RangeError} `EINVAL` for a bad `additionalMs`, before a Redis call is made.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, ... when Redis could not be asked.
   * @example
   * for (const chunk of chunks) {
   *   await exportChunk(chunk)
   *   await handle.extend(30_000) // stop exporting if this rejects: the lock is gone
   * }
   */
  extend(additionalMs: number): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

export declare class DistributedLock {
  /** Locks kept in this process (`memory://<name>`), shared by its worker_threads: no Redis. */
  static memory(name?: string, options?: LockOptions): DistributedLock
  constructor(redis: RedisInput | RedlockNodes, options?: LockOptions)
  /**
   * Acquires `key`, retrying `maxRetries` times with exponential backoff. Resolves once Redis
   * has recorded the holder.
   * @throws {LockAcquisitionError} `ELOCKED` when the lock stayed held through the retries.
   * @throws {TypeError | RangeError} `EINVAL` for a bad key, TTL or option, before a Redis call is made.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, `EAUTH`, `ENOPERM` or `EREDIS` when Redis
   *   could not be asked (never confused with "held").
   * @throws the `signal`'s reason when `options.signal` aborts.
   * @example
   * const handle = await lock.acquire('invoice:42', 10_000)
   * try {
   *   await send(invoice, handle.fence)
   * } finally {
   *   await handle.release()
   * }
   */
  acquire(key: string, ttlMs?: number, options?: AcquireOptions): Promise<LockHandle>
  /**
   * One attempt; resolves `null` when the key is held.
   * @throws {TypeError | RangeError} `EINVAL` for a bad key or TTL, before a Redis call is made.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, ... when Redis could not be asked.
   * @example
   * const handle = await lock.tryAcquire(`cron:report:${day}`, 60_000)
   * if (handle) await runReport() // one instance of the cluster runs it
   */
  tryAcquire(key: string, ttlMs?: number, options?: RefreshOptions): Promise<LockHandle | null>
  /**
   * Waits up to `timeoutMs` for the lock, woken when its holder releases it.
   * @throws {LockAcquisitionError} `ELOCKED` when `timeoutMs` passed with the lock held.
   * @throws {TypeError | RangeError} `EINVAL` for a bad key, timeout or TTL, before a Redis call is made.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, ... when Redis could not be asked.
   * @throws the `signal`'s reason when `options.signal` aborts.
   * @example
   * const handle = await lock.waitForLock('queue:drain', 5_000, 30_000)
   */
  waitForLock(key: string, timeoutMs: number, ttlMs?: number, options?: AcquireOptions): Promise<LockHandle>
  /**
   * Whether anyone holds `key`.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, ... when Redis cannot be asked (never `false`).
   * @example
   * if (await lock.isLocked('deploy')) console.log('a deploy is running')
   */
  isLocked(key: string): Promise<boolean>
  /**
   * Writes `value` to the hash at `key` unless a higher fencing token wrote there; `false`
   * when rejected as stale.
   * @throws {TypeError | RangeError} `EINVAL` for a bad key, or a value or fence that is not a string, before a Redis call is made.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, `EREDIS`, ... when Redis could not write.
   * @example
   * const handle = await lock.acquire('account:7')
   * await lock.fencedSet('balance:7', '120', handle.fence) // false if a later holder wrote
   */
  fencedSet(key: string, value: string, fence: string): Promise<boolean>
  /**
   * Acquires, runs `fn`, releases in `finally`; resolves with `fn`'s result. `signal` aborts,
   * its reason a LockLostError, when the lock is lost while `fn` runs (reported by the
   * watchdog with `autoRefresh`, else its TTL ran out); `using` then rejects with that error
   * once `fn` settles, unless `fn` threw (its own error wins). With `autoRefresh`, a lock in
   * doubt (`suspended`) as `fn` ends is waited for, by its TTL at most or until `signal` aborts
   * (then its reason): resumed, `fn`'s result; lost, the LockLostError. Without it, a lock in
   * doubt is asked of Redis (an extend by 1 ms): still ours, `fn`'s result; else the LockLostError.
   * @throws what `acquire` (or `waitForLock`, with `timeoutMs`) throws, what `fn` throws, or a
   *   {@link LockLostError} `ELOST` when the lock was lost while `fn` ran.
   * @example
   * const total = await lock.using('report', async (handle, signal) => build({ signal }), { ttlMs: 30_000, autoRefresh: true })
   */
  using<T>(key: string, fn: (handle: LockHandle, signal: AbortSignal) => T | Promise<T>, options?: UsingOptions): Promise<T>
  /**
   * What this lock's calls have done (with every instance of the same connection and
   * settings, which share its native side), kept natively; cheap enough to call often.
   * @example const { acquisitions, waitMs } = lock.stats()
   */
  stats(): LockStats
}

/** Stable error codes. */
export type LockErrorCode =
  | 'ELOCKED'
  | 'ELOST'
  | 'ENOTHELD'
  | 'ECONNECTION'
  | 'ETIMEDOUT'
  | 'EAUTH'
  | 'ENOPERM'
  | 'EREDIS'
  | 'EABORTED'
  | 'EINVAL'
  | 'EINTERNAL'

export declare class LockError extends Error {
  constructor(message: string, code: LockErrorCode, options?: { cause?: unknown })
  readonly code: LockErrorCode
}

export declare class LockAcquisitionError extends LockError {
  constructor(key: string, retriesAttempted: number, message?: string)
  readonly code: 'ELOCKED'
  readonly key: string
  readonly retriesAttempted: number
}

export declare class InvalidLockError extends LockError {
  constructor(key: string, message?: string)
  readonly code: 'ENOTHELD'
  readonly key: string
}

/** An auto-refreshed lock is gone: deleted, taken over, unconfirmed until its TTL ran out, or given up (stall, max hold). */
export declare class LockLostError extends LockError {
  constructor(key: string, message?: string)
  readonly code: 'ELOST'
  readonly key: string
}

/** A logger in pino's shape; every method is optional. */
export interface Logger {
  info?(...args: unknown[]): void
  warn?(...args: unknown[]): void
  error?(...args: unknown[]): void
  debug?(...args: unknown[]): void
  trace?(...args: unknown[]): void
  isLevelEnabled?(level: string): boolean
}

/** maestro's logger service, which DistributedLockService also takes. */
export interface MaestroLogger {
  logInfo?(...args: unknown[]): void
  logWarning?(...args: unknown[]): void
  logError?(...args: unknown[]): void
  logDebug?(...args: unknown[]): void
}

export interface ExclusiveLockOptions {
  /** Names the lock; slugified into the key. Required. */
  name: string
  /** An ioredis or node-redis client (only its settings are read), a URL, or `{ host, port, ... }`. Required. */
  cache_connection: RedisInput | RedlockNodes
  /** Default: silent. */
  log?: Logger
  /** Lock TTL in ms; give together with `lock_refresh_ms`. Default 3000. */
  lock_ttl_ms?: number
  /** Refresh period in ms, at least 500 below `lock_ttl_ms`. Default 1000. */
  lock_refresh_ms?: number
  /** Value stored in the lock key (e.g. a pod name). Default `'1'`. */
  lock_contents?: string
  /** Default `'exclusive-lock'`. */
  key_prefix?: string
  /** Give the lock up when the JS thread has been blocked this long (0: never). Default 3 x `lock_ttl_ms`. */
  max_stall_ms?: number
  /** Give the lock up this long after acquiring it, whatever happens. Default: no limit. */
  max_hold_ms?: number
  /** How long the fence counter is kept after the lock's last use (0 or Infinity: forever). Default 7 days. */
  fence_retention_ms?: number
  /** Ours: count what its calls do for `stats()`; false keeps every count at zero. Default true. */
  stats?: boolean
  /** Ours: a connection of its own, nothing more: its pair locks are never granted across processes (README "Grants across processes"). Default false. */
  cross_process_grants?: boolean
  /** Ours: no lock for this many ms after a Redis restart or failover (README "Guarantees"); 0, the default, is off. On a Redlock a gate per node, on a Cluster a gate per master. */
  restart_quarantine_ms?: number
  /** Ours: logs each event at its level (README "Tracing"); `log` stays the original's. */
  logger?: TracingLogger
  /** Ours: told of each event (README "Tracing"). */
  onEvent?: OnLockEvent
}

export interface ExclusiveLockEvents {
  acquired: [key: string]
  refreshed: [payload: { key: string; lock_ttl_ms: number }]
  /** The connection to Redis dropped: the lock is in doubt (`acquired` false) until confirmed. */
  suspended: [payload: { key: string }]
  /** After `suspended`, a refresh confirmed the lock is still ours. */
  resumed: [payload: { key: string }]
  released: [key: string]
  /**
   * The lock was lost (a `LockLostError`), then also when the automatic release that follows
   * fails (a `LockError` with the failure's code). Both name the lock in `key`.
   */
  error: [err: LockLostError | (LockError & { readonly key: string })]
}

export interface LockInspection {
  /** Remaining TTL in ms (-1: no TTL). */
  lock_ttl_ms: number
  lock_contents: string
}

/** Drop-in for @logdna/exclusive-lock. */
export declare class ExclusiveLock extends EventEmitter<ExclusiveLockEvents> {
  constructor(options: ExclusiveLockOptions)
  readonly key: string
  readonly name: string
  readonly acquired: boolean
  /** Whether a refresh is on its way to Redis right now (assigning it changes nothing). */
  is_refreshing: boolean
  /** While held, a handle on the native refresh (its `unref()` lets the process exit); `null` otherwise. */
  readonly refresh_timer: RefreshTimer | null
  /** Fencing token of the current hold, or null when not held. */
  readonly fence: string | null
  readonly lock_ttl_ms: number
  readonly lock_refresh_ms: number
  readonly lock_contents: string
  readonly max_stall_ms: number
  readonly max_hold_ms: number | undefined
  readonly log: Logger
  readonly cache_connection: RedisInput | RedlockNodes
  /**
   * One attempt; `true` when this instance holds the lock (and again while it does). A lock
   * lost later is an `'error'` event (a `LockLostError`), then an automatic release.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, `EAUTH`, `ENOPERM` or `EREDIS` when Redis
   *   could not be asked.
   * @example
   * lock.on('error', (err) => stopLeading(err))
   * if (await lock.acquire()) startLeading()
   */
  acquire(): Promise<boolean>
  /**
   * Contents and remaining TTL of whoever holds the lock, or `null`.
   * @throws {LockError} `ECONNECTION`, `ETIMEDOUT`, ... when Redis could not be asked.
   * @example
   * const held = await lock.inspect()
   * if (held) console.log(`held by ${held.lock_contents} for ${held.lock_ttl_ms} ms more`)
   */
  inspect(): Promise<LockInspection | null>
  /**
   * What this lock's calls have done (with every instance of the same settings), kept
   * natively; cheap enough to call often.
   * @example const { acquisitions, contended, refreshes, lost } = lock.stats()
   */
  stats(): LockStats
  /**
   * Stops refreshing and deletes the lock if it is still ours. Idempotent.
   * @throws {LockError} when Redis could not be asked (also emitted as `'error'`).
   * @example
   * process.once('SIGTERM', async () => {
   *   await lock.release() // the next instance leads at once, not after the TTL
   *   process.exit(0)
   * })
   */
  release(): Promise<void>
  /** Lets the process exit while the lock is held. */
  unref(): this
  /** Keeps the process alive while the lock is held (the default). */
  ref(): this
  /** Whether a held lock keeps the process alive. */
  hasRef(): boolean
}

/** `ExclusiveLock.refresh_timer` while the lock is held. */
export interface RefreshTimer {
  hasRef(): boolean
  ref(): this
  unref(): this
}

/** Any cache in maestro's shape: driven through these methods when its Redis connection cannot be read. */
export interface MaestroCache {
  setIfNotExists(key: string, value: string, ttlMs: number): Promise<unknown>
  get(key: string): Promise<unknown>
  del(key: string): Promise<unknown>
  expire(key: string, ttlMs: number): Promise<unknown>
  connect?(): Promise<unknown>
  disconnect?(): unknown
  isConnected?: unknown
}

export interface LockServiceStatus {
  lockKey: string
  lockValue: string
  ttl: number
  isLocked: boolean
  hasAutoRefresh: boolean
  cacheConnected: unknown
  hasCacheLayer: boolean
}

/** Drop-in for @jonaskahn/maestro's DistributedLockService. */
export declare class DistributedLockService {
  constructor(
    lockKey: string,
    ttlMs?: number,
    cacheInstance?: RedisInput | RedlockNodes | MaestroCache | null,
    options?: {
      logger?: Logger | MaestroLogger
      /** How long the fence counter is kept after the lock's last use (0 or Infinity: forever). Default 7 days. */
      fenceRetentionMs?: number
      /** Count what its calls do for `stats()`; false keeps every count at zero. Default true. */
      stats?: boolean
      /** Not in the original: a release gives the lock to the next waiting process (README "Grants across processes"). Default false. */
      crossProcessGrants?: boolean
      /** Not in the original: no lock for this many ms after a Redis restart or failover (README "Guarantees"); 0, the default, is off. On a Redlock a gate per node, on a Cluster a gate per master; refused on a maestro cache. */
      restartQuarantineMs?: number
      /** Told of each event (README "Tracing"); a throwing hook is logged to `logger`. */
      onEvent?: OnLockEvent
      /**
       * Not in the original: `logger` also logs each event at its level (README "Tracing"),
       * beside maestro's own messages. Default false: maestro's messages only.
       */
      logEvents?: boolean
      /** Not in the original: the held lock's connection to Redis dropped (the lock is in doubt). */
      onSuspended?: (service: DistributedLockService) => void
      /** Not in the original: after `onSuspended`, a refresh confirmed the lock is still ours. */
      onResumed?: (service: DistributedLockService) => void
      /** Not in the original: a refresh found the held lock gone or taken (`isLocked` is false by then). */
      onLost?: (service: DistributedLockService, error: LockLostError) => void
    },
  )
  /** The Redis key, verbatim; read at each acquire(). */
  lockKey: string
  /** The TTL in ms when acquire() gives none; read at each acquire(). */
  ttl: number
  /** The value our lock holds in Redis (a fresh token per hold on the native path). */
  lockValue: string
  /** Set while the lock is refreshed (natively), `null` otherwise. */
  refreshInterval: object | null
  /** Held, as far as this instance knows; turns false when the lock is found lost. */
  isLocked: boolean
  /** Not in the original: the connection dropped while held, and no refresh has confirmed the lock since. */
  readonly suspended: boolean
  readonly cacheLayer: unknown
  /**
   * `true` once held; `false` after `maxWaitTime` (default 3 x TTL) or on a Redis error, as
   * maestro answers (errors go to the logger, not to the caller).
   * @throws {TypeError | RangeError} `EINVAL` for a bad `lockTtl` or `maxWaitTime`, before a Redis call is made.
   * @example
   * if (await service.acquire(60_000, 2_000)) {
   *   try { await produce() } finally { await service.release() }
   * }
   */
  acquire(lockTtl?: number, maxWaitTime?: number): Promise<boolean>
  /**
   * `true` when released or already gone; `false` when another holder has it, or on error
   * (never rejects, as maestro).
   * @example
   * if (!(await service.release())) console.warn('not released: taken over, or Redis failed (see the logger)')
   */
  release(): Promise<boolean>
  /** Releases, then calls `cacheInstance.disconnect()` as the original does. */
  disconnect(): Promise<void>
  getStatus(): LockServiceStatus
  getLockKey(): string
  getLockTtl(): number
  /**
   * What this service's calls have done (zero through a cache object of another kind).
   * @example const { acquisitions, waitMs } = service.stats()
   */
  stats(): LockStats
}
