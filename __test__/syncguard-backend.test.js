'use strict'

// native-redis-lock/syncguard's createRedisBackend on a private redis-server (and on memory://
// through scripts/test-backend.js memory): results and reasons as syncguard's, its Redis layout
// read back raw, the checks before any I/O in syncguard's order, and the fence thresholds.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startBackend } = require('./helpers/backend')
const sg = require('../syncguard')
const { FAILURE_REASON } = require('../lib/syncguard/failure-reason')

let backend
let raw
let store
let n = 0
/** A key no other test uses. */
const fresh = (name) => `${name}-${++n}`

before(async () => {
  backend = await startBackend()
  raw = backend.client()
  await raw.connect()
  store = sg.createRedisBackend(backend.url)
})

after(async () => {
  raw.disconnect()
  await backend.close()
})

/** `promise` rejects with syncguard's LockError `code` (and `message` when given). */
async function rejectsWith(promise, code, message) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof sg.LockError, `not a syncguard LockError: ${err}`)
    assert.equal(err.code, code)
    if (message instanceof RegExp) assert.match(err.message, message)
    else if (message !== undefined) assert.equal(err.message, message)
    return true
  })
}

const LOCK_ID = /^[A-Za-z0-9_-]{22}$/

test('acquire wins with a lockId, a server expiry and a 15-digit fence, then answers locked', async () => {
  const key = fresh('won')
  const before = Date.now()
  const won = await store.acquire({ key, ttlMs: 10_000 })
  assert.equal(won.ok, true)
  assert.match(won.lockId, LOCK_ID)
  assert.match(won.fence, /^\d{15}$/)
  assert.ok(won.expiresAtMs >= before + 10_000 - 1000 && won.expiresAtMs <= Date.now() + 10_000 + 1000)
  assert.equal(typeof won.release, 'function')
  assert.equal(typeof won.extend, 'function')
  assert.equal(typeof won[Symbol.asyncDispose], 'function')
  const lost = await store.acquire({ key, ttlMs: 10_000 })
  assert.equal(lost.ok, false)
  assert.equal(lost.reason, 'locked')
  assert.deepEqual(await lost.release(), { ok: false })
  assert.deepEqual(await lost.extend(1000), { ok: false })
  assert.deepEqual(await won.release(), { ok: true })
  assert.deepEqual(await won.release(), { ok: false }, 'a handle releases once')
  const again = await store.acquire({ key, ttlMs: 10_000 })
  assert.equal(again.ok, true)
  assert.ok(again.fence > won.fence, 'fences increase per key')
  assert.equal(BigInt(again.fence), BigInt(won.fence) + 1n)
  await again.release()
})

test('the layout is syncguard\'s: lock key, index key and fence key, with its JSON record', async () => {
  const key = fresh('layout')
  const won = await store.acquire({ key, ttlMs: 20_000 })
  const lockKey = `syncguard:${key}`
  const record = JSON.parse(await raw.get(lockKey))
  assert.deepEqual(Object.keys(record).sort(), ['acquiredAtMs', 'expiresAtMs', 'fence', 'key', 'lockId'])
  assert.equal(record.lockId, won.lockId)
  assert.equal(record.key, key)
  assert.equal(record.fence, won.fence)
  assert.equal(record.expiresAtMs, won.expiresAtMs)
  assert.equal(record.expiresAtMs - record.acquiredAtMs, 20_000)
  assert.equal(await raw.get(`syncguard:id:${won.lockId}`), lockKey)
  const [lockTtl, indexTtl] = [await raw.pttl(lockKey), await raw.pttl(`syncguard:id:${won.lockId}`)]
  assert.ok(lockTtl > 19_000 && lockTtl <= 20_000, `lock PX ${lockTtl}`)
  assert.ok(Math.abs(lockTtl - indexTtl) < 100, `index PX ${indexTtl} beside ${lockTtl}`)
  const fenceKey = `syncguard:fence:syncguard:${key}`
  assert.equal(await raw.get(fenceKey), String(Number(won.fence)))
  assert.equal(await raw.pttl(fenceKey), -1, 'the fence counter never expires')
  await won.release()
  assert.equal(await raw.exists(lockKey), 0)
  assert.equal(await raw.exists(`syncguard:id:${won.lockId}`), 0)
  assert.equal(await raw.exists(fenceKey), 1, 'a release never deletes the fence counter')
})

test('keyPrefix names every key; trailing colons are stripped as syncguard strips them', async () => {
  const key = fresh('prefixed')
  const mine = sg.createRedisBackend(backend.url, { keyPrefix: 'app::' })
  const won = await mine.acquire({ key, ttlMs: 10_000 })
  assert.ok(await raw.get(`app:${key}`))
  assert.equal(await raw.get(`app:id:${won.lockId}`), `app:${key}`)
  assert.equal(await raw.get(`app:fence:app:${key}`), '1')
  assert.equal(await store.isLocked({ key }), false, 'another prefix is another lock')
  await won.release()
})

test('a key longer than the storage limit is hashed as syncguard hashes it', async () => {
  const prefix = 'p'.repeat(470)
  const key = `k${'x'.repeat(510)}`
  const mine = sg.createRedisBackend(backend.url, { keyPrefix: prefix })
  const won = await mine.acquire({ key, ttlMs: 10_000 })
  const lockKey = sg.makeStorageKey(prefix, key, 1000, 26)
  assert.notEqual(lockKey, `${prefix}:${key}`, 'hashed')
  assert.equal(JSON.parse(await raw.get(lockKey)).key, key)
  assert.equal(await mine.isLocked({ key }), true)
  assert.deepEqual(await won.release(), { ok: true })
})

test('index keys on either side of the longest prefix that leaves them unhashed (948 bytes) are makeStorageKey\'s', async () => {
  for (const prefix of ['p'.repeat(948), 'p'.repeat(949), `${'q'.repeat(948)}::`]) {
    const mine = sg.createRedisBackend(backend.url, { keyPrefix: prefix })
    const key = fresh('edge')
    const won = await mine.acquire({ key, ttlMs: 10_000 })
    const lockKey = sg.makeStorageKey(prefix, key, 1000, 26)
    const indexKey = sg.makeStorageKey(prefix, `id:${won.lockId}`, 1000, 26)
    assert.equal(await raw.get(indexKey), lockKey, `the index key under a ${prefix.length}-byte prefix`)
    assert.equal(JSON.parse(await raw.get(lockKey)).lockId, won.lockId)
    assert.equal(await mine.isLocked({ key }), true)
    assert.deepEqual(await mine.release({ lockId: won.lockId }), { ok: true })
    assert.equal(await raw.exists(lockKey), 0)
  }
})

test('storage keys stay makeStorageKey\'s past the 1024 keys a backend remembers, and for a key in two Unicode forms', async () => {
  const mine = sg.createRedisBackend(backend.url, { keyPrefix: 'many' })
  const keys = Array.from({ length: 1100 }, () => fresh('many'))
  for (let i = 0; i < keys.length; i += 100) {
    const won = await Promise.all(keys.slice(i, i + 100).map((key) => mine.acquire({ key, ttlMs: 10_000 })))
    assert.ok(won.every((result) => result.ok))
    await Promise.all(won.map((result) => result.release()))
  }
  for (const key of [keys[0], 'caf\u00e9', 'cafe\u0301', keys[0]]) {
    const won = await mine.acquire({ key, ttlMs: 10_000 })
    const lockKey = sg.makeStorageKey('many', key, 1000, 26)
    assert.equal(JSON.parse(await raw.get(lockKey)).lockId, won.lockId)
    assert.equal(await raw.get(sg.makeStorageKey('many', `id:${won.lockId}`, 1000, 26)), lockKey)
    assert.deepEqual(await won.release(), { ok: true })
  }
})

test('release answers ok or not, with syncguard\'s hidden reasons', async () => {
  const key = fresh('reasons')
  const won = await store.acquire({ key, ttlMs: 10_000 })
  const foreign = 'AAAAAAAAAAAAAAAAAAAAAA'
  const missing = await store.release({ lockId: foreign })
  assert.equal(missing.ok, false)
  assert.deepEqual(Object.keys(missing), ['ok'])
  assert.equal(missing[FAILURE_REASON].reason, 'not-found')
  assert.deepEqual(await store.release({ lockId: won.lockId }), { ok: true })
  // A record whose JSON expiry passed while its keys live on: -2, deleted, "expired".
  const stale = 'BBBBBBBBBBBBBBBBBBBBBB'
  const lockKey = `syncguard:${key}`
  const record = { lockId: stale, expiresAtMs: Date.now() - 5000, acquiredAtMs: Date.now() - 9000, key, fence: '000000000000009' }
  await raw.set(lockKey, JSON.stringify(record), 'PX', 60_000)
  await raw.set(`syncguard:id:${stale}`, lockKey, 'PX', 60_000)
  const expired = await store.release({ lockId: stale })
  assert.deepEqual(Object.keys(expired), ['ok'])
  assert.equal(expired.ok, false)
  assert.equal(expired[FAILURE_REASON].reason, 'expired')
  assert.equal(await raw.exists(lockKey), 0)
  assert.equal(await raw.exists(`syncguard:id:${stale}`), 0)
})

test('extend replaces the TTL (never adds), answers the server expiry, and never resurrects', async () => {
  const key = fresh('extend')
  const won = await store.acquire({ key, ttlMs: 10_000 })
  const longer = await store.extend({ lockId: won.lockId, ttlMs: 60_000 })
  assert.equal(longer.ok, true)
  assert.ok(Math.abs(longer.expiresAtMs - (Date.now() + 60_000)) < 1500)
  const lockKey = `syncguard:${key}`
  assert.ok((await raw.pttl(lockKey)) > 50_000)
  assert.equal(JSON.parse(await raw.get(lockKey)).expiresAtMs, longer.expiresAtMs)
  const shorter = await won.extend(3000)
  assert.equal(shorter.ok, true)
  assert.ok((await raw.pttl(lockKey)) <= 3000, 'replaced, not added')
  assert.ok((await raw.pttl(`syncguard:id:${won.lockId}`)) <= 3000)
  await won.release()
  const gone = await store.extend({ lockId: won.lockId, ttlMs: 10_000 })
  assert.deepEqual(Object.keys(gone), ['ok'])
  assert.equal(gone.ok, false)
  assert.equal(gone[FAILURE_REASON].reason, 'not-found')
  assert.equal(await raw.exists(lockKey), 0, 'not resurrected')
})

test('isLocked, with and without the clean-up and its 2 s guard; the fence counter is never cleaned', async () => {
  const key = fresh('isLocked')
  assert.equal(await store.isLocked({ key }), false)
  const won = await store.acquire({ key, ttlMs: 10_000 })
  assert.equal(await store.isLocked({ key }), true)
  await won.release()
  const cleaning = sg.createRedisBackend(backend.url, { cleanupInIsLocked: true })
  const lockKey = `syncguard:${key}`
  const plant = async (lockId, agoMs) => {
    const record = { lockId, expiresAtMs: Date.now() - agoMs, acquiredAtMs: 0, key, fence: '000000000000001' }
    await raw.set(lockKey, JSON.stringify(record), 'PX', 60_000)
    await raw.set(`syncguard:id:${lockId}`, lockKey, 'PX', 60_000)
  }
  await plant('CCCCCCCCCCCCCCCCCCCCCC', 1500)
  assert.equal(await cleaning.isLocked({ key }), false)
  assert.equal(await raw.exists(lockKey), 1, 'within the guard: left alone')
  await plant('DDDDDDDDDDDDDDDDDDDDDD', 5000)
  assert.equal(await store.isLocked({ key }), false)
  assert.equal(await raw.exists(lockKey), 1, 'no clean-up unless asked')
  assert.equal(await cleaning.isLocked({ key }), false)
  assert.equal(await raw.exists(lockKey), 0, 'past the guard: deleted')
  assert.equal(await raw.exists('syncguard:id:DDDDDDDDDDDDDDDDDDDDDD'), 0)
  assert.equal(await raw.exists(`syncguard:fence:syncguard:${key}`), 1)
})

test('lookup by key and by lockId: sanitised, raw data behind the registered symbol, null when gone', async () => {
  const key = fresh('lookup')
  const won = await store.acquire({ key, ttlMs: 10_000 })
  for (const info of [await store.lookup({ key }), await store.lookup({ lockId: won.lockId })]) {
    assert.deepEqual(Object.keys(info).sort(), ['acquiredAtMs', 'expiresAtMs', 'fence', 'keyHash', 'lockIdHash'])
    assert.equal(info.keyHash, sg.hashKey(key))
    assert.equal(info.lockIdHash, sg.hashKey(won.lockId))
    assert.equal(info.fence, won.fence)
    assert.equal(info.expiresAtMs, won.expiresAtMs)
    assert.deepEqual(info[Symbol.for('syncguard.rawData')], { key, lockId: won.lockId })
  }
  assert.deepEqual(await sg.getByKeyRaw(store, key).then((i) => [i.key, i.lockId]), [key, won.lockId])
  assert.equal(await sg.owns(store, won.lockId), true)
  assert.equal(await store.lookup({ lockId: 'EEEEEEEEEEEEEEEEEEEEEE' }), null)
  await won.release()
  assert.equal(await store.lookup({ key }), null)
  assert.equal(await store.lookup({ lockId: won.lockId }), null)
  assert.equal(await sg.owns(store, won.lockId), false)
})

test('await using releases the lock at the end of its block', async () => {
  const key = fresh('dispose')
  const won = await store.acquire({ key, ttlMs: 10_000 })
  await won[Symbol.asyncDispose]()
  assert.equal(await store.isLocked({ key }), false)
  await won[Symbol.asyncDispose]()
})

test('bad input is refused before any I/O, in syncguard\'s order, always as a rejection', async () => {
  const aborted = AbortSignal.abort()
  const checks = [
    // The key is checked before the signal, the signal before the TTL.
    [() => store.acquire({ key: '', ttlMs: 0, signal: aborted }), 'InvalidArgument', 'Key must not be empty'],
    [() => store.acquire({ key: 'k', ttlMs: 0, signal: aborted }), 'Aborted', 'Operation aborted by signal'],
    [() => store.acquire({ key: 'k', ttlMs: 1.5 }), 'InvalidArgument', 'ttlMs must be a positive integer'],
    [() => store.acquire({ key: 7, ttlMs: 10 }), 'InvalidArgument', 'Key must be a string'],
    [() => store.acquire({ key: 'é'.repeat(257), ttlMs: 10 }), 'InvalidArgument', 'Key exceeds maximum length of 512 bytes after normalization'],
    [() => store.release({ lockId: 'short', signal: aborted }), 'Aborted', 'Operation aborted by signal'],
    [() => store.release({ lockId: 'short' }), 'InvalidArgument', 'Invalid lockId format. Expected 22 base64url characters, got: short'],
    [() => store.extend({ lockId: '', ttlMs: 5 }), 'InvalidArgument', 'Invalid lockId format. Expected 22 base64url characters, got: empty/null'],
    [() => store.extend({ lockId: 'AAAAAAAAAAAAAAAAAAAAAA', ttlMs: -1 }), 'InvalidArgument', 'ttlMs must be a positive integer'],
    [() => store.isLocked({ key: '', signal: aborted }), 'Aborted', 'Operation aborted by signal'],
    [() => store.isLocked({ key: '' }), 'InvalidArgument', 'Key must not be empty'],
    [() => store.lookup({}), 'InvalidArgument', 'Invalid lockId format. Expected 22 base64url characters, got: empty/null'],
    [() => store.lookup({ key: undefined, lockId: 'AAAAAAAAAAAAAAAAAAAAAA' }), 'InvalidArgument', 'Key must be a string'],
    [() => store.lookup({ key: 'k', signal: aborted }), 'Aborted', 'Operation aborted by signal'],
  ]
  for (const [call, code, message] of checks) {
    let promise
    assert.doesNotThrow(() => {
      promise = call()
    }, 'never a synchronous throw')
    await rejectsWith(promise, code, message)
  }
})

test('keyPrefix: fence rules at creation, a too-long prefix per call', async () => {
  for (const keyPrefix of ['a:fence:b', 'myfence']) {
    assert.throws(
      () => sg.createRedisBackend(backend.url, { keyPrefix }),
      (err) =>
        err instanceof sg.LockError &&
        err.code === 'InvalidArgument' &&
        err.message ===
          `keyPrefix cannot contain 'fence:' or end with 'fence' to prevent accidental fence counter deletion (current: ${keyPrefix})`,
    )
  }
  assert.throws(() => sg.createRedisBackend(backend.url, { keyPrefix: 5 }), (err) => err.code === 'InvalidArgument')
  const long = sg.createRedisBackend(backend.url, { keyPrefix: 'p'.repeat(980) })
  await rejectsWith(
    long.acquire({ key: 'k', ttlMs: 10 }),
    'InvalidArgument',
    'Prefix exceeds backend limit after accounting for reserved bytes. Use a shorter prefix.',
  )
  await rejectsWith(long.isLocked({ key: 'k' }), 'InvalidArgument')
  assert.deepEqual(store.capabilities, { backend: 'redis', supportsFencing: true, timeAuthority: 'server' })
})

test('fences: a warning past FENCE_THRESHOLDS.WARN; past MAX, Internal and the lock released', async (t) => {
  const key = fresh('fence')
  const fenceKey = `syncguard:fence:syncguard:${key}`
  await raw.set(fenceKey, '90000000000000')
  const warned = []
  t.mock.method(console, 'warn', (message) => warned.push(message))
  const won = await store.acquire({ key, ttlMs: 10_000 })
  assert.equal(won.fence, '090000000000001')
  assert.deepEqual(warned, [`[SyncGuard] Fence counter approaching limit: fence=090000000000001, key=${key}, max=900000000000000`])
  await won.release()
  await raw.set(fenceKey, '900000000000000')
  await assert.rejects(store.acquire({ key, ttlMs: 10_000 }), (err) => {
    assert.equal(err.code, 'Internal')
    assert.equal(err.message, 'Fence counter overflow - exceeded operational limit (900000000000000)')
    assert.deepEqual(err.context, { key })
    return true
  })
  assert.equal(await store.isLocked({ key }), false, 'released (a Differences row)')
})

test('a value that is not syncguard\'s JSON at the lock key is an Internal error', async () => {
  const key = fresh('garbage')
  await raw.set(`syncguard:${key}`, 'not json')
  await rejectsWith(store.acquire({ key, ttlMs: 1000 }), 'Internal')
  await rejectsWith(store.lookup({ key }), 'Internal')
})

test('withTelemetry on our backend reads the hidden reasons', async () => {
  const key = fresh('telemetry')
  const events = []
  const watched = sg.withTelemetry(store, { onEvent: (event) => events.push(event) })
  const won = await watched.acquire({ key, ttlMs: 10_000 })
  await watched.acquire({ key, ttlMs: 10_000 })
  await watched.release({ lockId: won.lockId })
  await watched.release({ lockId: won.lockId })
  await watched.extend({ lockId: won.lockId, ttlMs: 1000 })
  const seen = events.map(({ type, result, reason }) => [type, result, reason])
  assert.deepEqual(seen, [
    ['acquire', 'ok', undefined],
    ['acquire', 'fail', 'locked'],
    ['release', 'ok', undefined],
    ['release', 'fail', 'not-found'],
    ['extend', 'fail', 'not-found'],
  ])
})

test('huge TTLs go to Redis as syncguard sends them: 1e14 is kept, 1e17 refused by Redis after the fence', async () => {
  const key = fresh('huge')
  const won = await store.acquire({ key, ttlMs: 1e14 })
  assert.equal(won.ok, true)
  assert.ok(won.expiresAtMs > 1e14)
  await won.release()
  const other = fresh('huger')
  await rejectsWith(store.acquire({ key: other, ttlMs: 1e17 }), 'Internal', /^Redis error: (?!Redis error)/)
  assert.equal(await raw.get(`syncguard:fence:syncguard:${other}`), '1', 'the fence was consumed, as with syncguard')
  assert.equal(await store.isLocked({ key: other }), false)
})
