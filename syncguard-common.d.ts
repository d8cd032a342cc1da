// Public types of native-redis-lock/syncguard/common, the counterpart of `syncguard/common`:
// the root's helpers and types (not createRedisBackend, createLock or the Redis types), plus
// the pieces a custom backend is built from.
import type {
  AcquireOk,
  AcquisitionOptions,
  AsyncLock,
  BackendCapabilities,
  Fence,
  LockBackend,
  LockConfig,
  LockInfo,
  OnReleaseError,
} from './syncguard'

export {
  lock,
  LockError,
  normalizeAndValidateKey,
  validateLockId,
  generateLockId,
  hashKey,
  makeStorageKey,
  getByKey,
  getById,
  getByKeyRaw,
  getByIdRaw,
  owns,
  hasFence,
  sanitizeLockInfo,
  withTelemetry,
  acquireHandle,
  decorateAcquireResult,
  isLive,
  calculateRedisServerTimeMs,
  TIME_TOLERANCE_MS,
  LOCK_DEFAULTS,
  BACKEND_DEFAULTS,
  BACKEND_LIMITS,
  FENCE_THRESHOLDS,
  MAX_KEY_LENGTH_BYTES,
  RESERVE_BYTES,
  type AcquireOk,
  type AcquireResult,
  type AcquisitionOptions,
  type AsyncLock,
  type BackendCapabilities,
  type DecoratedAcquireResult,
  type DisposableLockHandle,
  type ExtendResult,
  type Fence,
  type HashId,
  type KeyLookup,
  type KeyOp,
  type LockBackend,
  type LockConfig,
  type LockErrorCode,
  type LockEvent,
  type LockInfo,
  type LockInfoDebug,
  type LockOp,
  type OnReleaseError,
  type OwnershipLookup,
  type ReleaseResult,
  type TelemetryOptions,
} from './syncguard'

/** The disposal settings a backend takes (syncguard's `BackendConfig`). */
export interface BackendConfig {
  onReleaseError?: OnReleaseError
  disposeTimeoutMs?: number
}

/** `lock` bound to `backend`. */
export declare function createAutoLock<C extends BackendCapabilities>(
  backend: LockBackend<C>,
): <T>(fn: () => Promise<T> | T, config: LockConfig & { acquisition?: AcquisitionOptions }) => Promise<T>

/** 15-digit zero-padded fence text; InvalidArgument when negative or over 15 digits. */
export declare function formatFence(value: bigint | number): string
/** Puts the raw `{ key, lockId }` on `lockInfo` for getByKeyRaw/getByIdRaw; returns `lockInfo`. */
export declare function attachRawData<C extends BackendCapabilities>(
  lockInfo: LockInfo<C>,
  rawData: { key: string; lockId: string },
): LockInfo<C>
/** The console warning for a fence past FENCE_THRESHOLDS.WARN. */
export declare function logFenceWarning(fence: Fence | number, key: string): void
/** Throws LockError("Aborted") when `signal` is aborted. */
export declare function checkAborted(signal?: AbortSignal): void
/** Resolves after `ms` ms. */
export declare function delay(ms: number): Promise<void>
/** The handle of a won acquisition: `result`'s fields with release, extend and async disposal. */
export declare function createDisposableHandle<C extends BackendCapabilities>(
  backend: Pick<LockBackend<C>, 'release' | 'extend'>,
  result: AcquireOk<C>,
  key: string,
  onReleaseError?: OnReleaseError,
  disposeTimeoutMs?: number,
): AsyncLock<C>

/** `{ ttlMs }` with BACKEND_DEFAULTS filled in. */
export declare function mergeBackendConfig(config: Pick<LockConfig, 'ttlMs'>): Required<Pick<LockConfig, 'ttlMs'>>
/** The acquisition settings with LOCK_DEFAULTS filled in. */
export declare function mergeAcquisitionConfig(
  options: AcquisitionOptions | undefined,
): Omit<Required<AcquisitionOptions>, 'signal'> & { signal?: AbortSignal }

/** Where a release/extend result keeps its failure reason for withTelemetry. */
export declare const FAILURE_REASON: unique symbol
export type MutationReason = 'expired' | 'not-found'
export type MutationCondition =
  | 'succeeded'
  | 'observable-expired'
  | 'never-existed'
  | 'ownership-mismatch'
  | 'cleaned-up-after-expiry'
  | 'ambiguous-unknown'
export type MutationResult = { ok: true } | { ok: false; reason: MutationReason }
export declare function mapToMutationResult(cond: MutationCondition): MutationResult
export declare function mapRedisScriptResult(code: number): MutationCondition
export declare function mapFirestoreConditions(conditions: {
  documentExists: boolean
  ownershipValid: boolean
  isLive: boolean
}): MutationCondition
export declare function mapBackendObservation(
  observation: number | { documentExists: boolean; ownershipValid: boolean; isLive: boolean },
): MutationCondition
