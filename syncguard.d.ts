// Public types of native-redis-lock/syncguard: syncguard 2.5.2's types (generic results whose
// `fence` exists when the backend's capabilities say so), plus createRedisBackend and createLock
// at the root. Hand-written, in our words.

import type { RedisInput, RedlockNodes, LockStats, OnLockEvent, TracingLogger } from './index'

// ---------------------------------------------------------------------------------------------
// Backends and their results

/** What a backend can do; a backend's own type narrows these to literal types. */
export interface BackendCapabilities {
  supportsFencing: boolean
  timeAuthority: 'server' | 'client'
}

/** The capabilities of createRedisBackend's backend: fences, and Redis's clock. */
export interface RedisCapabilities extends BackendCapabilities {
  backend: 'redis'
  supportsFencing: true
  timeAuthority: 'server'
}

export type KeyOp = Readonly<{ key: string; signal?: AbortSignal }>
export type LockOp = Readonly<{ lockId: string; signal?: AbortSignal }>
export type KeyLookup = { key: string; signal?: AbortSignal }
export type OwnershipLookup = { lockId: string; signal?: AbortSignal }

/** A fencing token: 15 decimal digits, zero-padded, so that string order is numeric order. */
export type Fence = string
/** hashKey's 24 hex digits. */
export type HashId = string

/** A won acquisition; with `fence` when the backend supports fencing (ours does). */
export type AcquireOk<C extends BackendCapabilities> = {
  ok: true
  lockId: string
  expiresAtMs: number
} & (C['supportsFencing'] extends true ? { fence: Fence } : {})

export type AcquireResult<C extends BackendCapabilities> = AcquireOk<C> | { ok: false; reason: 'locked' }

/** What `backend.acquire` resolves with: the result plus release/extend/dispose (`await using`). */
export type DecoratedAcquireResult<C extends BackendCapabilities> =
  | (AcquireOk<C> & {
      release(signal?: AbortSignal): Promise<ReleaseResult>
      extend(ttlMs: number, signal?: AbortSignal): Promise<ExtendResult>
      [Symbol.asyncDispose](): Promise<void>
    })
  | ({ ok: false; reason: 'locked' } & {
      release(): Promise<ReleaseResult>
      extend(ttlMs: number): Promise<ExtendResult>
      [Symbol.asyncDispose](): Promise<void>
    })

export type ReleaseResult = { ok: true } | { ok: false }
export type ExtendResult = { ok: true; expiresAtMs: number } | { ok: false }

/** A lookup's answer: hashes, never the key or lockId themselves. */
export type LockInfo<C extends BackendCapabilities> = {
  keyHash: HashId
  lockIdHash: HashId
  expiresAtMs: number
  acquiredAtMs: number
} & (C['supportsFencing'] extends true ? { fence: Fence } : {})

/** getByKeyRaw/getByIdRaw's answer: LockInfo plus the raw key and lockId. */
export type LockInfoDebug<C extends BackendCapabilities> = LockInfo<C> & { key: string; lockId: string }

/** Told of a release that failed during disposal (or in `lock()`'s final release). */
export type OnReleaseError = (error: Error, context: { lockId: string; key: string; source: 'disposal' }) => void

export interface LockBackend<C extends BackendCapabilities = BackendCapabilities> {
  /**
   * One attempt: `{ ok: true, lockId, expiresAtMs, fence }` when won, `{ ok: false, reason:
   * 'locked' }` when someone holds the key (never a rejection for that).
   * @throws {LockError} `InvalidArgument` for a bad key or `ttlMs`, before a Redis call is made;
   *   `Aborted` when `signal` is already aborted; `NetworkTimeout`, `ServiceUnavailable` or
   *   `AuthFailed` when Redis could not be asked; `Internal` for a script error or a fence
   *   counter past its limit.
   * @example
   * const result = await backend.acquire({ key: 'job:42', ttlMs: 30_000 })
   * if (result.ok) {
   *   try { await run(result.fence) } finally { await result.release() }
   * }
   */
  acquire: (opts: KeyOp & { ttlMs: number }) => Promise<DecoratedAcquireResult<C>>
  /**
   * Deletes the lock `lockId` if it is still that lock: `{ ok: true }`, else `{ ok: false }`
   * (expired, released or taken over).
   * @throws {LockError} `InvalidArgument` for a malformed `lockId`, before a Redis call is made;
   *   `Aborted`, `NetworkTimeout`, `ServiceUnavailable`, `AuthFailed` or `Internal` as for acquire.
   * @example
   * const { ok } = await backend.release({ lockId })
   * if (!ok) console.warn('the lock had expired or changed hands before the release')
   */
  release: (opts: LockOp) => Promise<ReleaseResult>
  /**
   * Sets the lock's TTL to `ttlMs` from now (it replaces the TTL, it does not add to it):
   * `{ ok: true, expiresAtMs }`, or `{ ok: false }` when the lock is no longer `lockId`'s.
   * @throws {LockError} `InvalidArgument` for a malformed `lockId` or a bad `ttlMs`, before a
   *   Redis call is made; `Aborted`, `NetworkTimeout`, `ServiceUnavailable`, `AuthFailed` or `Internal`
   *   as for acquire.
   * @example
   * const extended = await backend.extend({ lockId, ttlMs: 30_000 })
   * if (!extended.ok) throw new Error('lock lost: stop the export')
   */
  extend: (opts: LockOp & { ttlMs: number }) => Promise<ExtendResult>
  /**
   * Whether a live lock holds `key` (never `false` for "Redis could not be asked").
   * @throws {LockError} `InvalidArgument` for a bad key, before a Redis call is made;
   *   `Aborted`, `NetworkTimeout`, `ServiceUnavailable`, `AuthFailed` or `Internal` as for acquire.
   * @example
   * if (await backend.isLocked({ key: 'deploy' })) console.log('a deploy is running')
   */
  isLocked: (opts: KeyOp) => Promise<boolean>
  /**
   * The live lock of `key` (or of `lockId`), with hashes instead of the key and lockId
   * (getByKeyRaw/getByIdRaw give them); `null` when there is none.
   * @throws {LockError} `InvalidArgument` for a bad key or lockId, before a Redis call is made;
   *   `Aborted`, `NetworkTimeout`, `ServiceUnavailable`, `AuthFailed` or `Internal` as for acquire.
   * @example
   * const info = await backend.lookup({ key: 'job:42' })
   * if (info) console.log(`held until ${new Date(info.expiresAtMs).toISOString()}, fence ${info.fence}`)
   */
  lookup(opts: KeyLookup): Promise<LockInfo<C> | null>
  /**
   * The lock `lockId` if it is still live; `null` otherwise. Throws as the key form does.
   * @example
   * const mine = (await backend.lookup({ lockId })) !== null
   */
  lookup(opts: OwnershipLookup): Promise<LockInfo<C> | null>
  readonly capabilities: Readonly<C>
}

// ---------------------------------------------------------------------------------------------
// lock() and handles

export interface LockConfig {
  key: string
  /** Default BACKEND_DEFAULTS.ttlMs (30000). */
  ttlMs?: number
  signal?: AbortSignal
  /** Told when the release after `fn` fails; default: logged unless NODE_ENV is production. */
  onReleaseError?: OnReleaseError
}

/** `lock()`'s retries; each defaults to LOCK_DEFAULTS, read at each call. */
export interface AcquisitionOptions {
  maxRetries?: number
  retryDelayMs?: number
  backoff?: 'exponential' | 'fixed'
  jitter?: 'equal' | 'full' | 'none'
  timeoutMs?: number
  signal?: AbortSignal
}

export interface DisposableLockHandle {
  release(signal?: AbortSignal): Promise<ReleaseResult>
  extend(ttlMs: number, signal?: AbortSignal): Promise<ExtendResult>
  [Symbol.asyncDispose](): Promise<void>
}

export type AsyncLock<C extends BackendCapabilities> = AcquireOk<C> & DisposableLockHandle

// ---------------------------------------------------------------------------------------------
// Telemetry

export type LockEvent = {
  type: string
  keyHash?: HashId
  lockIdHash?: HashId
  result: 'ok' | 'fail'
  reason?: 'expired' | 'not-found' | 'locked'
  key?: string
  lockId?: string
}

export interface TelemetryOptions {
  onEvent: (event: LockEvent) => void
  /** Put the raw key/lockId on events: always, never (default), or when the predicate says. */
  includeRaw?: boolean | ((event: LockEvent) => boolean)
}

// ---------------------------------------------------------------------------------------------
// Redis

/**
 * An object naming no server that has `eval` (syncguard's test mocks): every call is one of
 * our scripts through it, ioredis's calling form, and nothing else is connected to.
 */
export interface SyncguardEvalOnly {
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): unknown
}

/**
 * What createRedisBackend takes: an ioredis or node-redis client (only its settings are read;
 * the package uses its own connection), a `redis://`/`rediss://`/`unix://` URL, `memory://<name>`,
 * connection settings, an array of 3 or more of those (a Redlock over independent masters), or an
 * object with only `eval`.
 */
export type SyncguardRedisInput = RedisInput | RedlockNodes | SyncguardEvalOnly

export interface RedisBackendOptions {
  /** Default `'syncguard'`; may not contain `'fence:'` or end with `'fence'`. */
  keyPrefix?: string
  /** Let isLocked delete an expired lock it finds. Default false. */
  cleanupInIsLocked?: boolean
  /** Told when a disposal's release fails; default: logged unless NODE_ENV is production. */
  onReleaseError?: OnReleaseError
  /** Bound on a disposal's release, in ms. Default: none. */
  disposeTimeoutMs?: number
  /** Added by native-redis-lock: bound on every Redis call, in ms. Default 5000. */
  commandTimeoutMs?: number
  /** Added by native-redis-lock: count what its calls do for `stats()`; false keeps every count at zero. Default true. */
  stats?: boolean
  /**
   * Added by native-redis-lock: no lock for this many ms after a Redis restart or failover
   * (README "Guarantees"); 0, the default, is off. On a Redlock a gate per node, on a Cluster
   * a gate per master; refused on a client used only through its `eval` (a node-redis cluster
   * client).
   */
  restartQuarantineMs?: number
  /** Added by native-redis-lock: logs each event at its level (README "Tracing"). */
  logger?: TracingLogger
  /** Added by native-redis-lock: told of each event (README "Tracing"). */
  onEvent?: OnLockEvent
}

export interface RedisConfig {
  keyPrefix: string
  cleanupInIsLocked: boolean
  onReleaseError?: OnReleaseError
  disposeTimeoutMs?: number
  /** Added by native-redis-lock. */
  commandTimeoutMs?: number
}

/** The JSON record stored at a lock key. */
export interface LockData {
  lockId: string
  expiresAtMs: number
  acquiredAtMs: number
  key: string
  fence: string
}

/**
 * A syncguard backend on Redis, run by this package's engine; checks `options` at once.
 * @throws {LockError} `InvalidArgument` for bad options or an address it cannot use, at once.
 * @example
 * const backend = createRedisBackend(process.env.REDIS_URL ?? 'memory://app', { keyPrefix: 'myapp' })
 * const won = await backend.acquire({ key: 'report:daily', ttlMs: 10_000 })
 * if (won.ok) await won.release()
 */
export declare function createRedisBackend(
  redis: SyncguardRedisInput,
  options?: RedisBackendOptions,
): LockBackend<RedisCapabilities> & {
  /** Added by native-redis-lock: what this backend's calls have done (zero over an `eval`-only object). */
  stats(): LockStats
}

/**
 * `lock()` bound to one Redis backend (made here, as `createRedisBackend` makes it); checks
 * `options` at once.
 * @throws {LockError} `InvalidArgument` for bad options or an address it cannot use, at once;
 *   the function it returns throws what `lock()` throws.
 * @example
 * const withLock = createLock(process.env.REDIS_URL ?? 'memory://app', { keyPrefix: 'myapp' })
 * const total = await withLock(async () => chargeOrder(123), { key: 'payment:123', ttlMs: 30_000 })
 */
export declare function createLock(
  redis: SyncguardRedisInput,
  options?: RedisBackendOptions,
): (<T>(fn: () => Promise<T> | T, config: LockConfig & { acquisition?: AcquisitionOptions }) => Promise<T>) & {
  /** Added by native-redis-lock: the backend's stats. */
  stats(): LockStats
}

// ---------------------------------------------------------------------------------------------
// Functions and values of syncguard's root

/**
 * Acquires `config.key` (retrying per `config.acquisition`), runs `fn`, releases; `fn`'s result.
 * @throws {LockError} `AcquisitionTimeout` when the lock stayed held past `acquisition.timeoutMs`,
 *   `ServiceUnavailable`/`NetworkTimeout` when the backend could not be asked, `InvalidArgument`
 *   for a bad config; or what `fn` throws (the lock is released first).
 * @example
 * const total = await lock(backend, async () => chargeOrder(123), { key: 'payment:123', ttlMs: 30_000 })
 */
export declare function lock<T, C extends BackendCapabilities>(
  backend: LockBackend<C>,
  fn: () => Promise<T> | T,
  config: LockConfig & { acquisition?: AcquisitionOptions },
): Promise<T>

export type LockErrorCode =
  | 'ServiceUnavailable'
  | 'AuthFailed'
  | 'InvalidArgument'
  | 'RateLimited'
  | 'NetworkTimeout'
  | 'AcquisitionTimeout'
  | 'Aborted'
  | 'Internal'

/** syncguard's error (not the root package's LockError: `code` comes first). */
export declare class LockError extends Error {
  constructor(code: LockErrorCode, message?: string, context?: { key?: string; lockId?: string; cause?: unknown })
  code: LockErrorCode
  context?: { key?: string; lockId?: string; cause?: unknown }
}

export declare function normalizeAndValidateKey(key: string): string
export declare function validateLockId(lockId: string): void
export declare function generateLockId(): string
export declare function hashKey(value: string): HashId
export declare function makeStorageKey(prefix: string, key: string, backendLimitBytes: number, reserveBytes: number): string

export declare function getByKey<C extends BackendCapabilities>(
  backend: LockBackend<C>,
  key: string,
  opts?: { signal?: AbortSignal },
): Promise<LockInfo<C> | null>
export declare function getById<C extends BackendCapabilities>(
  backend: LockBackend<C>,
  lockId: string,
  opts?: { signal?: AbortSignal },
): Promise<LockInfo<C> | null>
export declare function getByKeyRaw<C extends BackendCapabilities>(
  backend: LockBackend<C>,
  key: string,
  opts?: { signal?: AbortSignal },
): Promise<LockInfoDebug<C> | null>
export declare function getByIdRaw<C extends BackendCapabilities>(
  backend: LockBackend<C>,
  lockId: string,
  opts?: { signal?: AbortSignal },
): Promise<LockInfoDebug<C> | null>
export declare function owns<C extends BackendCapabilities>(backend: LockBackend<C>, lockId: string): Promise<boolean>
export declare function hasFence<C extends BackendCapabilities>(
  result: AcquireResult<C>,
): result is AcquireOk<C> & { fence: Fence }
export declare function sanitizeLockInfo<C extends BackendCapabilities>(
  rawData: { key: string; lockId: string; expiresAtMs: number; acquiredAtMs: number; fence?: string },
  capabilities: C,
): LockInfo<C>

export declare function withTelemetry<C extends BackendCapabilities>(
  backend: LockBackend<C>,
  options: TelemetryOptions,
): LockBackend<C>

export declare function acquireHandle<C extends BackendCapabilities>(
  backend: LockBackend<C>,
  opts: KeyOp & { ttlMs: number },
): Promise<AsyncLock<C> | { ok: false; reason: 'locked' }>
export declare function decorateAcquireResult<C extends BackendCapabilities>(
  backend: Pick<LockBackend<C>, 'release' | 'extend'>,
  result: AcquireResult<C>,
  key: string,
  onReleaseError?: OnReleaseError,
  disposeTimeoutMs?: number,
): DecoratedAcquireResult<C>

export declare function isLive(expiresAtMs: number, nowMs: number, toleranceMs: number): boolean
export declare function calculateRedisServerTimeMs(redisTime: [string, string]): number
export declare const TIME_TOLERANCE_MS: 1000

export declare const MAX_KEY_LENGTH_BYTES: 512
export declare const BACKEND_LIMITS: { readonly REDIS: 1000; readonly POSTGRES: 1700; readonly FIRESTORE: 1500 }
export declare const RESERVE_BYTES: { readonly REDIS: 26; readonly POSTGRES: 0; readonly FIRESTORE: 0 }
export declare const BACKEND_DEFAULTS: { readonly ttlMs: 30000 }
/** A plain object, read at each `lock()` call: assigning to it changes the defaults. */
export declare const LOCK_DEFAULTS: {
  maxRetries: number
  retryDelayMs: number
  timeoutMs: number
  backoff: 'exponential'
  jitter: 'equal'
}
export declare const FENCE_THRESHOLDS: { readonly MAX: '900000000000000'; readonly WARN: '090000000000000' }
