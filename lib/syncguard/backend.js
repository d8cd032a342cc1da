'use strict'

// createRedisBackend: syncguard's backend on our engine. Options and checks in syncguard's
// order, its storage keys (redis-keys.js, over the exported makeStorageKey), one native call per
// method, the decoration of acquire results, the hidden failure reasons, the fence warning,
// and our native errors as syncguard's LockError. Every lock decision is the core's.

const { NativeSyncguard } = require('../native')
const { connectionOptions, connectionError } = require('../connection')
const { fromNative } = require('../errors')
const { sharedAlike, sharedWith } = require('../shared-connection')
const { LockError } = require('./errors')
const { normalizeAndValidateKey, validateLockId } = require('./validation')
const { generateLockId } = require('./keys')
const layout = require('./redis-keys')
const { FENCE_THRESHOLDS } = require('./constants')
const { attachRawData, sanitizeLockInfo, logFenceWarning, checkAborted } = require('./helpers')
const { decorateAcquireResult, defaultOnReleaseError } = require('./disposable')
const { failedWith } = require('./failure-reason')
const { toLockError } = require('./redis-errors')
const { evalOnly, evalTransport } = require('./eval-transport')
const { statsOf } = require('../stats')
const { tracerOf, checkTracing } = require('../tracing')

const DEFAULT_PREFIX = 'syncguard'
// An array of servers is a Redlock over them, as for our other APIs (docs/plans/redlock.md).
const REDLOCK = { redlock: true }

/** Our backends, with what lock() needs to take the native loop (see lock.js). */
const ours = new WeakMap()

/** The `redis` argument read as our other APIs read it; what names no server is refused. */
function connectionOf(redis, restartQuarantineMs) {
  let read
  const own = { restartQuarantineMs }
  try {
    if (typeof redis === 'string' && redis.length > 0) return { connection: sharedWith(redis, undefined, own), read }
    read = connectionOptions(redis, 'redis', REDLOCK)
    return { connection: sharedWith(undefined, read.connection, own), read }
  } catch (err) {
    // A refused URL is shown with its password hidden, as our other APIs show it; a refused
    // Redlock node names that node.
    let shown = fromNative(err)
    if (typeof redis === 'string' && redis.length > 0) shown = connectionError(shown, connectionOptions(redis, 'redis'))
    else if (read?.nodes) shown = connectionError(shown, read)
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
  // Ours: false keeps stats() at zero (README "Stats").
  if (o.stats !== undefined && typeof o.stats !== 'boolean') {
    throw new LockError('InvalidArgument', `stats must be a boolean, got ${typeof o.stats}`)
  }
  // Ours: no lock for this long after a Redis restart (README "Guarantees"); 0 is off.
  const quarantine = o.restartQuarantineMs
  if (quarantine !== undefined && !(Number.isInteger(quarantine) && quarantine >= 0 && quarantine <= 2_147_483_647)) {
    throw new LockError(
      'InvalidArgument',
      `restartQuarantineMs must be a whole number of milliseconds from 0 to 2147483647, got ${String(quarantine)}`,
    )
  }
  return {
    keyPrefix,
    stats: o.stats,
    restartQuarantineMs: quarantine,
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
function transportOf(redis, config, own) {
  const settings = {
    keyPrefix: config.keyPrefix,
    cleanupInIsLocked: config.cleanupInIsLocked === true,
    commandTimeoutMs: config.commandTimeoutMs,
    stats: config.stats,
  }
  let named
  try {
    named = connectionOf(redis, config.restartQuarantineMs)
  } catch (err) {
    // An ioredis Cluster has eval too, but is read as a cluster (or refused as one).
    if (!evalOnly(redis) || redis.isCluster) throw err
    if (config.restartQuarantineMs) {
      // The eval transport learns nothing of the server's incarnation: refused, not ignored.
      throw new LockError(
        'InvalidArgument',
        'restartQuarantineMs is not supported with a client our calls go through by eval (a node-redis cluster client, an eval-only object); pass a Redis URL or a single-server client, or set it to 0',
      )
    }
    return { native: evalTransport(redis, settings), viaEval: true, slotSafe: false }
  }
  const { connection, read } = named
  settings.clientKeyPrefix = read?.clientKeyPrefix
  try {
    // The native side keeps only a lockId → key table of what it won: one per settings.
    const make = () => ({
      native: new NativeSyncguard(connection, settings),
      connection,
      settings,
    })
    // A traced backend has its own (its hook alone hears what the native side sees).
    const shared = own ? make() : sharedAlike(connection, 'syncguard', '', settings, make)
    // On a cluster whose prefix holds no hash tag, a lockId names its lock key's slot
    // (README "Differences"): made by the native side from the fresh one.
    return { native: shared.native, viaEval: false, slotSafe: shared.native.slotSafe }
  } catch (err) {
    throw toLockError(err)
  }
}

/** The prefix as makeStorageKey uses it: its trailing colons dropped. */
function baseOf(prefix) {
  let base = prefix
  while (base.endsWith(':')) base = base.slice(0, -1)
  return base
}

// Storage keys remembered per key string (syncguard derives them anew at every call: NFC,
// UTF-8 byte counts, maybe a hash); cleared whole when full, as a bound on what it keeps.
const REMEMBERED_KEYS = 1024

/**
 * syncguard's storage keys under `prefix`, as makeStorageKey names them. With a prefix short
 * enough that no key of a valid user key can fail (≤ 948 bytes: a hashed key and an index key
 * both fit), a key's lock and fence keys are remembered and an index key is a concatenation
 * (a lockId is 22 ASCII characters, never hashed there); with a longer one, every call derives
 * them as syncguard does, so that its errors come in its order.
 */
function storageKeys(prefix, native, slotSafe) {
  const base = baseOf(prefix)
  const short = Buffer.byteLength(base) + (base ? 1 : 0) + 'id:'.length + 22 + layout.RESERVE <= layout.LIMIT
  const idPrefix = base ? `${base}:id:` : 'id:'
  const indexKey = short ? (lockId) => idPrefix + lockId : (lockId) => layout.indexKeyOf(prefix, lockId)
  const remembered = new Map()

  /** The normalised key (validated, throwing as normalizeAndValidateKey does) and its keys. */
  function entryOf(key) {
    const known = remembered.get(key)
    if (known !== undefined) return known
    const normalized = normalizeAndValidateKey(key)
    if (!short) return { normalized }
    const lockKey = layout.lockKeyOf(prefix, normalized)
    const entry = { normalized, lockKey, fenceKey: layout.fenceKeyOf(prefix, lockKey) }
    if (remembered.size >= REMEMBERED_KEYS) remembered.clear()
    remembered.set(key, entry)
    return entry
  }

  /** The keys of one acquisition of `entry`'s key under the fresh lockId `fresh`. */
  function keysOf(entry, fresh) {
    const lockKey = entry.lockKey ?? layout.lockKeyOf(prefix, entry.normalized)
    const fenceKey = entry.fenceKey ?? layout.fenceKeyOf(prefix, lockKey)
    const lockId = slotSafe ? native.lockIdFor(lockKey, fresh) : fresh
    return { key: entry.normalized, lockKey, indexKey: indexKey(lockId), fenceKey, lockId }
  }

  /** The lock key of user key `key`, validated. */
  function lockKeyOf(key) {
    const entry = entryOf(key)
    return entry.lockKey ?? layout.lockKeyOf(prefix, entry.normalized)
  }

  return { entryOf, keysOf, indexKey, lockKeyOf }
}

/** `createRedisBackend(redis, options)`: syncguard's LockBackend on our engine. */
function createRedisBackend(redis, options = {}) {
  const config = configOf(options)
  // Ours: a logger and an onEvent hook (README "Tracing"), checked after syncguard's options.
  try {
    checkTracing(options?.logger, options?.onEvent, 'options')
  } catch (err) {
    throw new LockError('InvalidArgument', err.message)
  }
  const tracer = tracerOf('syncguard', options?.logger, options?.onEvent)
  const { native, viaEval, slotSafe } = transportOf(redis, config, tracer !== null)
  const { entryOf, keysOf, indexKey, lockKeyOf } = storageKeys(config.keyPrefix, native, slotSafe)
  const capabilities = { backend: 'redis', supportsFencing: true, timeAuthority: 'server' }

  /** A won acquisition's result (a value, not a promise: no extra turn for the caller). */
  function wonWith(keys, [fence, expiresAtMs], userKey, started) {
    const text = fenceText(fence)
    if (text > FENCE_THRESHOLDS.MAX) return overflowed(keys, userKey)
    if (text > FENCE_THRESHOLDS.WARN) logFenceWarning(text, userKey)
    tracer?.acquired(userKey, text, started)
    return { ok: true, lockId: keys.lockId, expiresAtMs, fence: text }
  }

  /** An overflowing fence: the lock is released and the acquire fails. */
  async function overflowed(keys, userKey) {
    await native.release(keys.indexKey, keys.lockId).catch(() => {})
    throw new LockError('Internal', `Fence counter overflow - exceeded operational limit (${FENCE_THRESHOLDS.MAX})`, {
      key: userKey,
    })
  }

  const backend = {
    // syncguard's checks in its order: the key (its decorating wrapper's), the signal, the TTL.
    async acquire(opts) {
      const entry = entryOf(opts.key)
      checkAborted(opts.signal)
      if (!Number.isInteger(opts.ttlMs) || opts.ttlMs <= 0) {
        throw new LockError('InvalidArgument', 'ttlMs must be a positive integer')
      }
      const keys = keysOf(entry, generateLockId())
      const started = tracer === null ? 0 : performance.now()
      let won
      try {
        won = await native.acquire(keys, opts.ttlMs)
      } catch (err) {
        const error = toLockError(err)
        tracer?.error(opts.key, error, 'acquire')
        throw error
      }
      let result = won === null ? { ok: false, reason: 'locked' } : wonWith(keys, won, opts.key, started)
      if (result instanceof Promise) result = await result
      return decorateAcquireResult(backend, result, entry.normalized, config.onReleaseError, config.disposeTimeoutMs)
    },

    async release(opts) {
      checkAborted(opts.signal)
      validateLockId(opts.lockId)
      const index = indexKey(opts.lockId)
      let code
      try {
        code = await native.release(index, opts.lockId)
      } catch (err) {
        const error = toLockError(err)
        tracer?.error(undefined, error, 'release')
        throw error
      }
      if (code === 1) {
        tracer?.emit({ type: 'released', lockId: opts.lockId })
        return { ok: true }
      }
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
        const error = toLockError(err)
        tracer?.error(undefined, error, 'extend')
        throw error
      }
      if (expiresAtMs !== null) tracer?.emit({ type: 'refreshed', lockId: opts.lockId, ttlMs: opts.ttlMs })
      // syncguard's extend script answers a bare 0 for every failure: always "not-found".
      return expiresAtMs === null ? failedWith('not-found') : { ok: true, expiresAtMs }
    },

    async isLocked(opts) {
      checkAborted(opts.signal)
      const lockKey = lockKeyOf(opts.key)
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
          json = await native.lookupByKey(lockKeyOf(opts.key))
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

    /** Our addition: what this backend's calls have done (README "Stats"); zero over `eval`. */
    stats() {
      return statsOf(viaEval ? null : native)
    },
  }
  if (!viaEval) {
    tracer?.observe(native, backend)
    ours.set(backend, { native, entryOf, keysOf, wonWith, acquire: backend.acquire, release: backend.release, toLockError, tracer })
  }
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
