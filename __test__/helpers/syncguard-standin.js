'use strict'

// A stand-in for syncguard 2.5.2's Redis backend and lock() (kriasoft/syncguard at 549ad5f,
// redis/ and common/), which is not on the registry here. It is an independent oracle, written
// for this project from docs/plans/syncguard.md §3 (the Redis layout and scripts) and §2.7
// (lock()), with its own key derivation and its own Lua text: deliberately not our
// lib/syncguard or src/core/proto/scripts/sg_*.lua, so that the mixed-fleet test and the bench
// compare ours with a reading of syncguard, not with ourselves. Not syncguard's code.
// Over an ioredis client (as syncguard is), through defineCommand (EVALSHA, as syncguard):
//   keys: lock  = P:<NFC key>, index = P:id:<lockId>, fence = P:fence:<lock key>, where P is the
//         keyPrefix (default "syncguard") without trailing ':'; a prefixed key whose UTF-8 bytes
//         + 26 exceed 1000 becomes P:<base64url of the first 16 bytes of its SHA-256>
//   value at the lock key: JSON {lockId, expiresAtMs, acquiredAtMs, key, fence}; the index
//         holds the lock key; both get PX ttlMs; the fence counter is INCR'd, never expires
//   time: Redis TIME in ms; a record is live while expiresAtMs > now - 1000
//   acquire: live record -> 0; else fence = %015d INCR, write both -> {1, fence, expiresAtMs}
//   release: index -> lock key -> record; none -> -1; expired -> delete both, -2; another
//         lockId -> 0; else delete both -> 1
//   extend: as release, every failure 0; else expiresAtMs = now + ttl (replaced), rewrite both
//   isLocked: live -> 1; else 0 (clean-up, with its 2 s guard, when asked)
//   lookup by key / by lockId: the live (and, by id, owned) record, or nil
//   lock(backend, fn, { key, ttlMs, acquisition }): syncguard's loop: at most maxRetries + 1
//         attempts, backoff "exponential" (retryDelayMs * 2^(n-1), the default) or "fixed",
//         jitter "equal" (the default), "full" or none, clamped to the time left of
//         timeoutMs, sleeping between attempts (no wake-up); then fn; then release.
// Validation is reduced to what the fleet and the bench need (the key rules, positive ttl).
const crypto = require('node:crypto')

const TOLERANCE_MS = 1000
const REDIS_LIMIT = 1000
const RESERVE = 26

const NOW_MS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tolerance = tonumber(ARGV[2])
`
// Each script starts with NOW_MS, so ARGV[2] is the tolerance in every one of them.
const SCRIPTS = {
  // KEYS lock, index, fence; ARGV lockId, tolerance, ttl, lock key (for the index), user key
  standinAcquire: {
    numberOfKeys: 3,
    lua: `${NOW_MS}
local current = redis.call('GET', KEYS[1])
if current and cjson.decode(current).expiresAtMs > now - tolerance then return 0 end
local ttl = tonumber(ARGV[3])
local counter = redis.call('INCR', KEYS[3])
local record = { lockId = ARGV[1], key = ARGV[5], acquiredAtMs = now, expiresAtMs = now + ttl,
  fence = string.format('%015d', counter) }
redis.call('SET', KEYS[2], ARGV[4], 'PX', ttl)
redis.call('SET', KEYS[1], cjson.encode(record), 'PX', ttl)
return { 1, record.fence, record.expiresAtMs }`,
  },
  // KEYS index; ARGV lockId, tolerance, mode ('release' | 'extend'), ttl (extend)
  standinSettle: {
    numberOfKeys: 1,
    lua: `${NOW_MS}
local extending = ARGV[3] == 'extend'
local function failed(code) if extending then return 0 end return code end
local target = redis.call('GET', KEYS[1])
if not target then return failed(-1) end
local raw = redis.call('GET', target)
if not raw then return failed(-1) end
local record = cjson.decode(raw)
if record.expiresAtMs <= now - tolerance then
  redis.call('DEL', target, KEYS[1])
  return failed(-2)
end
if record.lockId ~= ARGV[1] then return failed(0) end
if not extending then
  redis.call('DEL', target, KEYS[1])
  return 1
end
local ttl = tonumber(ARGV[4])
record.expiresAtMs = now + ttl
redis.call('SET', target, cjson.encode(record), 'PX', ttl)
redis.call('SET', KEYS[1], target, 'PX', ttl)
return { 1, record.expiresAtMs }`,
  },
  // KEYS lock; ARGV prefix, tolerance, clean-up ('true' | 'false')
  standinIsLocked: {
    numberOfKeys: 1,
    lua: `${NOW_MS}
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local record = cjson.decode(raw)
if record.expiresAtMs > now - tolerance then return 1 end
if ARGV[3] == 'true' and now - record.expiresAtMs > 2000 then
  redis.call('DEL', KEYS[1])
  if record.lockId then
    local sep = ':'
    if string.sub(ARGV[1], -1) == ':' then sep = '' end
    redis.call('DEL', ARGV[1] .. sep .. 'id:' .. record.lockId)
  end
end
return 0`,
  },
  // KEYS lock key, or index key (by id); ARGV lockId or '', tolerance
  standinLookup: {
    numberOfKeys: 1,
    lua: `${NOW_MS}
local target = KEYS[1]
if ARGV[1] ~= '' then
  target = redis.call('GET', KEYS[1])
  if not target then return nil end
end
local raw = redis.call('GET', target)
if not raw then return nil end
local record = cjson.decode(raw)
if ARGV[1] ~= '' and record.lockId ~= ARGV[1] then return nil end
if record.expiresAtMs <= now - tolerance then return nil end
return raw`,
  },
}

const utf8Length = (s) => Buffer.byteLength(s, 'utf8')

class StandInError extends Error {
  constructor(code, message) {
    super(message)
    this.name = 'LockError'
    this.code = code
  }
}

function normalizedKey(key) {
  if (typeof key !== 'string') throw new StandInError('InvalidArgument', 'Key must be a string')
  if (key === '') throw new StandInError('InvalidArgument', 'Key must not be empty')
  const nfc = key.normalize('NFC')
  if (utf8Length(nfc) > 512) throw new StandInError('InvalidArgument', 'Key exceeds maximum length of 512 bytes after normalization')
  return nfc
}

/** The storage key for `key` under `prefix`: prefixed, or hashed when it would be too long. */
function storageKey(prefix, key) {
  const base = prefix.replace(/:+$/, '')
  const join = (tail) => (base ? `${base}:${tail}` : tail)
  const plain = join(key.normalize('NFC'))
  if (utf8Length(plain) + RESERVE <= REDIS_LIMIT) return plain
  const digest = crypto.createHash('sha256').update(plain, 'utf8').digest().subarray(0, 16)
  return join(digest.toString('base64url'))
}

/** syncguard's 96-bit display hash: three rolling 32-bit hashes over UTF-16 code units. */
function hashKey(value) {
  const s = value.normalize('NFC')
  const h = [0, 0, 0]
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    h[0] = (Math.imul(h[0], 31) + c) | 0
    h[1] = (Math.imul(h[1], 127) + 3 * c) | 0
    h[2] = (Math.imul(h[2], 2047) + 7 * c) | 0
  }
  return h.map((x) => (x >>> 0).toString(16).padStart(8, '0')).join('')
}

const positiveTtl = (ttlMs) => {
  if (!Number.isInteger(ttlMs) || ttlMs <= 0) throw new StandInError('InvalidArgument', 'ttlMs must be a positive integer')
}

/** The stand-in backend: syncguard's createRedisBackend(redis, { keyPrefix }) as read in §3. */
function createStandinBackend(redis, { keyPrefix = 'syncguard', cleanupInIsLocked = false } = {}) {
  for (const [name, { numberOfKeys, lua }] of Object.entries(SCRIPTS)) {
    if (typeof redis[name] !== 'function') redis.defineCommand(name, { numberOfKeys, lua })
  }
  const indexKey = (lockId) => storageKey(keyPrefix, `id:${lockId}`)
  const backend = {
    capabilities: { backend: 'redis', supportsFencing: true, timeAuthority: 'server' },
    async acquire({ key, ttlMs }) {
      const user = normalizedKey(key)
      positiveTtl(ttlMs)
      const lockId = crypto.randomBytes(16).toString('base64url')
      const lockKey = storageKey(keyPrefix, user)
      const fenceKey = storageKey(keyPrefix, `fence:${lockKey}`)
      const reply = await redis.standinAcquire(lockKey, indexKey(lockId), fenceKey, lockId, TOLERANCE_MS, ttlMs, lockKey, user)
      if (reply === 0) return { ok: false, reason: 'locked' }
      const [, fence, expiresAtMs] = reply
      return {
        ok: true,
        lockId,
        expiresAtMs,
        fence,
        release: () => backend.release({ lockId }),
        extend: (ttl) => backend.extend({ lockId, ttlMs: ttl }),
      }
    },
    async release({ lockId }) {
      const code = await redis.standinSettle(indexKey(lockId), lockId, TOLERANCE_MS, 'release', 0)
      return { ok: code === 1 }
    },
    async extend({ lockId, ttlMs }) {
      positiveTtl(ttlMs)
      const reply = await redis.standinSettle(indexKey(lockId), lockId, TOLERANCE_MS, 'extend', ttlMs)
      return Array.isArray(reply) ? { ok: true, expiresAtMs: reply[1] } : { ok: false }
    },
    async isLocked({ key }) {
      const lockKey = storageKey(keyPrefix, normalizedKey(key))
      return (await redis.standinIsLocked(lockKey, keyPrefix, TOLERANCE_MS, String(cleanupInIsLocked))) === 1
    },
    async lookup(query) {
      const byKey = 'key' in query
      const raw = byKey
        ? await redis.standinLookup(storageKey(keyPrefix, normalizedKey(query.key)), '', TOLERANCE_MS)
        : await redis.standinLookup(indexKey(query.lockId), query.lockId, TOLERANCE_MS)
      if (raw === null) return null
      const record = JSON.parse(raw)
      return {
        keyHash: hashKey(record.key),
        lockIdHash: hashKey(record.lockId),
        expiresAtMs: record.expiresAtMs,
        acquiredAtMs: record.acquiredAtMs,
        fence: record.fence,
      }
    },
  }
  return backend
}

const LOCK_DEFAULTS = { maxRetries: 10, retryDelayMs: 100, timeoutMs: 5000, backoff: 'exponential', jitter: 'equal' }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** syncguard's lock(backend, fn, config) as §2.7 reads it (exponential, "equal" jitter). */
async function standinLock(backend, fn, { key, ttlMs = 30_000, acquisition = {} }) {
  normalizedKey(key)
  positiveTtl(ttlMs)
  const maxRetries = acquisition.maxRetries ?? LOCK_DEFAULTS.maxRetries
  const retryDelayMs = acquisition.retryDelayMs ?? LOCK_DEFAULTS.retryDelayMs
  const timeoutMs = acquisition.timeoutMs ?? LOCK_DEFAULTS.timeoutMs
  const backoff = acquisition.backoff ?? LOCK_DEFAULTS.backoff
  const jitter = acquisition.jitter ?? LOCK_DEFAULTS.jitter
  const started = Date.now()
  let won
  for (let attempts = 1; ; attempts++) {
    const elapsed = Date.now() - started
    if (elapsed >= timeoutMs) throw new StandInError('AcquisitionTimeout', `Failed to acquire lock after ${elapsed}ms (${attempts} attempts)`)
    won = await backend.acquire({ key, ttlMs })
    if (won.ok) break
    if (attempts > maxRetries) throw new StandInError('AcquisitionTimeout', `Failed to acquire lock after ${attempts} attempts (lock contention)`)
    const full = backoff === 'exponential' ? retryDelayMs * 2 ** (attempts - 1) : retryDelayMs
    const jittered = jitter === 'equal' ? full / 2 + (Math.random() * full) / 2 : jitter === 'full' ? Math.random() * full : full
    const delay = Math.min(jittered, Math.max(0, timeoutMs - (Date.now() - started)))
    if (delay <= 0) throw new StandInError('AcquisitionTimeout', `Timeout reached before next retry (${Date.now() - started}ms elapsed)`)
    await sleep(delay)
  }
  try {
    return await fn()
  } finally {
    await backend.release({ lockId: won.lockId }).catch(() => {})
  }
}

module.exports = { createStandinBackend, standinLock, storageKey, hashKey, StandInError, TOLERANCE_MS }
