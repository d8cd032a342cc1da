'use strict'

// createRedisBackend: syncguard's backend on our engine. Options and checks in syncguard's
// order, its storage keys (computed here by the exported makeStorageKey), one native call per
// method, the decoration of acquire results, the hidden failure reasons, the fence warning,
// and our native errors as syncguard's LockError. Every lock decision is the core's.

const { NativeSyncguard } = require('../native')
const { connectionOptions, connectionError } = require('../connection')
const { fromNative } = require('../errors')
const { sharedConnection, sharedUrl, sharedAlike } = require('../shared-connection')
const { LockError } = require('./errors')
const { normalizeAndValidateKey, validateLockId } = require('./validation')
const { generateLockId, makeStorageKey } = require('./keys')
const { FENCE_THRESHOLDS } = require('./constants')
const { attachRawData, sanitizeLockInfo, logFenceWarning, checkAborted } = require('./helpers')
const { decorateAcquireResult, defaultOnReleaseError } = require('./disposable')
const { failedWith } = require('./failure-reason')
const { toLockError } = require('./redis-errors')
const { evalOnly, evalTransport } = require('./eval-transport')

// syncguard's Redis key budget: 1000 bytes, 26 kept for ":id:" and a lockId.
const LIMIT = 1000
const RESERVE = 26
const DEFAULT_PREFIX = 'syncguard'

/** Our backends, with what lock() needs to take the native loop (see lock.js). */
const ours = new WeakMap()

/** The `redis` argument read as our other APIs read it; what names no server is refused. */
function connectionOf(redis) {
  let read
  try {
    if (typeof redis === 'string' && redis.length > 0) return { connection: sharedUrl(redis), read }
    read = connectionOptions(redis, 'redis')
    return { connection: sharedConnection(read.connection), read }
  } catch (err) {
    // A refused URL is shown with its password hidden, as our other APIs show it.
    let shown = fromNative(err)
    if (typeof redis === 'string' && redis.length > 0) shown = connectionError(shown, connectionOptions(redis, 'redis'))
    const text = shown instanceof Error ? shown.message : String(shown)
    const message = /^redis\b/.test(text) ? text : `redis: ${text}`
    throw new LockError('InvalidArgument', message, { cause: shown })
  }
}

/** syncguard's config checks, then ours (options it does not have). */
function configOf(options) {
  const o = options ?? {}
  const keyPrefix = o.keyPrefix ?? DEFAULT_PREFIX
  if (typeof keyPrefix !== 'string') {
    throw new LockError('InvalidArgument', `keyPrefix must be a string, got ${typeof keyPrefix}`)
  }
  if (keyPrefix && (keyPrefix.includes('fence:') || keyPrefix.endsWith('fence'))) {
    throw new LockError(
      'InvalidArgument',
      `keyPrefix cannot contain 'fence:' or end with 'fence' to prevent accidental fence counter deletion (current: ${keyPrefix})`,
    )
  }
  const ms = o.commandTimeoutMs
  if (ms !== undefined && (typeof ms !== 'number' || !(ms > 0) || !Number.isFinite(ms))) {
    throw new LockError('InvalidArgument', `commandTimeoutMs must be a positive finite number of ms, got ${String(ms)}`)
  }
  return {
    keyPrefix,
    cleanupInIsLocked: o.cleanupInIsLocked ?? false,
    onReleaseError: o.onReleaseError ?? defaultOnReleaseError,
    disposeTimeoutMs: o.disposeTimeoutMs,
    commandTimeoutMs: ms,
  }
}

/** A fence as syncguard writes it: 15 digits, zero-padded. */
const fenceText = (fence) => String(fence).padStart(15, '0')

/**
 * The calls' transport: our connection to the server `redis` names or, for an object naming
 * none that has `eval` (a test double, as syncguard allows), that `eval`. The second is not
 * ours for lock(): its waits are JS's backoff, never woken.
 */
function transportOf(redis, config) {
  const settings = {
    keyPrefix: config.keyPrefix,
    cleanupInIsLocked: config.cleanupInIsLocked === true,
    commandTimeoutMs: config.commandTimeoutMs,
  }
  let named
  try {
    named = connectionOf(redis)
  } catch (err) {
    // An ioredis Cluster has eval too, but is read as a cluster (or refused as one).
    if (!evalOnly(redis) || redis.isCluster) throw err
    return { native: evalTransport(redis, settings), viaEval: true }
  }
  const { connection, read } = named
  settings.clientKeyPrefix = read?.clientKeyPrefix
  try {
    // The native side keeps only a lockId → key table of what it won: one per settings.
    const shared = sharedAlike(connection, 'syncguard', '', settings, () => ({
      native: new NativeSyncguard(connection, settings),
      connection,
      settings,
    }))
    return { native: shared.native, viaEval: false }
  } catch (err) {
    throw toLockError(err)
  }
}

/** `createRedisBackend(redis, options)`: syncguard's LockBackend on our engine. */
function createRedisBackend(redis, options = {}) {
  const config = configOf(options)
  const { native, viaEval } = transportOf(redis, config)
  const prefix = config.keyPrefix
  const indexKey = (lockId) => makeStorageKey(prefix, `id:${lockId}`, LIMIT, RESERVE)
  /** The keys of one acquisition of `key` (normalised) under a fresh lockId. */
  const keysOf = (key, lockId) => {
    const lockKey = makeStorageKey(prefix, key, LIMIT, RESERVE)
    const fenceKey = makeStorageKey(prefix, `fence:${lockKey}`, LIMIT, RESERVE)
    return { key, lockKey, indexKey: indexKey(lockId), fenceKey, lockId }
  }
  const capabilities = { backend: 'redis', supportsFencing: true, timeAuthority: 'server' }

  /** A won acquisition's result; an overflowing fence releases the lock and fails. */
  async function wonWith(keys, [fence, expiresAtMs], userKey) {
    const text = fenceText(fence)
    if (text > FENCE_THRESHOLDS.MAX) {
      await native.release(keys.indexKey, keys.lockId).catch(() => {})
      throw new LockError('Internal', `Fence counter overflow - exceeded operational limit (${FENCE_THRESHOLDS.MAX})`, {
        key: userKey,
      })
    }
    if (text > FENCE_THRESHOLDS.WARN) logFenceWarning(text, userKey)
    return { ok: true, lockId: keys.lockId, expiresAtMs, fence: text }
  }

  async function acquireCore(opts) {
    checkAborted(opts.signal)
    normalizeAndValidateKey(opts.key)
    if (!Number.isInteger(opts.ttlMs) || opts.ttlMs <= 0) {
      throw new LockError('InvalidArgument', 'ttlMs must be a positive integer')
    }
    const lockId = generateLockId()
    const keys = keysOf(normalizeAndValidateKey(opts.key), lockId)
    let won
    try {
      won = await native.acquire(keys, opts.ttlMs)
    } catch (err) {
      throw toLockError(err)
    }
    if (won === null) return { ok: false, reason: 'locked' }
    return wonWith(keys, won, opts.key)
  }

  const backend = {
    async acquire(opts) {
      const normalizedKey = normalizeAndValidateKey(opts.key)
      const result = await acquireCore(opts)
      return decorateAcquireResult(backend, result, normalizedKey, config.onReleaseError, config.disposeTimeoutMs)
    },

    async release(opts) {
      checkAborted(opts.signal)
      validateLockId(opts.lockId)
      const index = indexKey(opts.lockId)
      let code
      try {
        code = await native.release(index, opts.lockId)
      } catch (err) {
        throw toLockError(err)
      }
      if (code === 1) return { ok: true }
      return failedWith(code === -2 ? 'expired' : 'not-found')
    },

    async extend(opts) {
      checkAborted(opts.signal)
      validateLockId(opts.lockId)
      if (!Number.isInteger(opts.ttlMs) || opts.ttlMs <= 0) {
        throw new LockError('InvalidArgument', 'ttlMs must be a positive integer')
      }
      const index = indexKey(opts.lockId)
      let expiresAtMs
      try {
        expiresAtMs = await native.extend(index, opts.lockId, opts.ttlMs)
      } catch (err) {
        throw toLockError(err)
      }
      // syncguard's extend script answers a bare 0 for every failure: always "not-found".
      return expiresAtMs === null ? failedWith('not-found') : { ok: true, expiresAtMs }
    },

    async isLocked(opts) {
      checkAborted(opts.signal)
      const lockKey = makeStorageKey(prefix, normalizeAndValidateKey(opts.key), LIMIT, RESERVE)
      try {
        return await native.isLocked(lockKey)
      } catch (err) {
        throw toLockError(err)
      }
    },

    async lookup(opts) {
      checkAborted(opts.signal)
      let json
      try {
        if ('key' in opts) {
          const lockKey = makeStorageKey(prefix, normalizeAndValidateKey(opts.key), LIMIT, RESERVE)
          json = await native.lookupByKey(lockKey)
        } else {
          validateLockId(opts.lockId)
          json = await native.lookupById(indexKey(opts.lockId), opts.lockId)
        }
        if (!json) return null
        const record = JSON.parse(json)
        const info = sanitizeLockInfo(record, capabilities)
        return attachRawData(info, { key: record.key, lockId: record.lockId })
      } catch (err) {
        throw toLockError(err)
      }
    },

    capabilities,
  }
  if (!viaEval) ours.set(backend, { native, keysOf, wonWith, acquire: backend.acquire, release: backend.release, toLockError })
  return backend
}

/**
 * What lock() needs to run its acquisition natively, when `backend` is ours and its acquire
 * and release are still our own (a wrapper or spy must see every attempt: it gets JS's loop).
 */
function nativeOf(backend) {
  const own = backend !== null && typeof backend === 'object' ? ours.get(backend) : undefined
  if (own === undefined || backend.acquire !== own.acquire || backend.release !== own.release) return undefined
  return own
}

module.exports = { createRedisBackend, nativeOf, toLockError }
