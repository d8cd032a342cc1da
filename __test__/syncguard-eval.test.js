'use strict'

// createRedisBackend on an object that has only `eval`, as syncguard allows for its test mocks:
// our scripts go through that eval, its replies are read as syncguard reads them (the bare
// codes of its mocks included), each call bounded, and nothing else is connected to. Backed
// by a real redis-server through an ioredis and a node-redis client made here, the backend
// locks alongside one of ours on that server; with canned replies, each reply shape is read.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { startRedis } = require('./helpers/redis-server')
const sg = require('../syncguard')

let server
let ioredis
let nodeRedis
let n = 0
const fresh = (name) => `${name}-${++n}`
const LOCK_ID = 'AAAAAAAAAAAAAAAAAAAAAA'

before(async () => {
  server = await startRedis()
  ioredis = new Redis({ port: server.port, lazyConnect: true })
  await ioredis.connect()
  nodeRedis = createClient({ url: server.url })
  await nodeRedis.connect()
})

after(async () => {
  ioredis.disconnect()
  await nodeRedis.quit()
  await server.close()
})

/** Plain objects whose only method is `eval`, ioredis's calling form, and what they were sent. */
function throughIoredis() {
  const sent = []
  return { sent, eval: (...args) => (sent.push(args), ioredis.eval(...args)) }
}

function throughNodeRedis() {
  return {
    eval: (script, count, ...rest) =>
      nodeRedis.eval(script, { keys: rest.slice(0, count), arguments: rest.slice(count).map(String) }),
  }
}

/** A result's public fields only: not its methods, nor the reason kept for telemetry. */
const plain = ({ ok, reason }) => (reason === undefined ? { ok } : { ok, reason })

/** A plain object answering `replies` in turn, recording each call. */
function canned(...replies) {
  const sent = []
  return {
    sent,
    eval: async (...args) => {
      sent.push(args)
      const reply = replies.shift()
      if (reply instanceof Error) throw reply
      return reply
    },
  }
}

for (const [name, make] of [['an ioredis', throughIoredis], ['a node-redis', throughNodeRedis]]) {
  test(`through ${name} client's eval: every method on a real redis-server, excluding a backend of ours`, async () => {
    const key = fresh('eval')
    const mock = sg.createRedisBackend(make(), { keyPrefix: 'ev' })
    const ours = sg.createRedisBackend(server.url, { keyPrefix: 'ev' })

    const won = await mock.acquire({ key, ttlMs: 10_000 })
    assert.equal(won.ok, true)
    assert.match(won.fence, /^\d{15}$/)
    assert.match(won.lockId, /^[A-Za-z0-9_-]{22}$/)
    assert.ok(Math.abs(won.expiresAtMs - Date.now() - 10_000) < 2000)
    assert.equal(await ioredis.exists(`ev:${key}`, `ev:id:${won.lockId}`), 2, "syncguard's keys, in that server")
    assert.deepEqual(plain(await ours.acquire({ key, ttlMs: 10_000 })), { ok: false, reason: 'locked' })
    assert.deepEqual(plain(await mock.acquire({ key, ttlMs: 10_000 })), { ok: false, reason: 'locked' })
    assert.equal(await mock.isLocked({ key }), true)
    assert.equal(await ours.isLocked({ key }), true)

    const info = await mock.lookup({ key })
    assert.equal(info.fence, won.fence)
    assert.equal(info.keyHash, sg.hashKey(key))
    assert.deepEqual(await sg.getByIdRaw(mock, won.lockId).then((raw) => [raw.key, raw.lockId]), [key, won.lockId])
    assert.equal(await ours.lookup({ lockId: won.lockId }).then((i) => i.fence), won.fence)
    assert.equal(await sg.owns(mock, LOCK_ID), false)

    const extended = await won.extend(20_000)
    assert.equal(extended.ok, true)
    assert.ok(extended.expiresAtMs - Date.now() > 15_000)
    assert.deepEqual(plain(await mock.release({ lockId: LOCK_ID })), { ok: false })
    assert.deepEqual(await won.release(), { ok: true })
    assert.equal(await mock.isLocked({ key }), false)
    assert.equal(await mock.lookup({ key }), null)
    assert.deepEqual(plain(await mock.extend({ lockId: won.lockId, ttlMs: 1000 })), { ok: false })

    const next = await ours.acquire({ key, ttlMs: 10_000 })
    assert.ok(next.fence > won.fence, 'one fence counter for both')
    assert.deepEqual(await mock.release({ lockId: next.lockId }), { ok: true }, "either releases the other's lockId it is given")
    assert.equal(await sg.lock(mock, async () => mock.isLocked({ key }), { key, ttlMs: 5000 }), true)
    assert.equal(await ours.isLocked({ key }), false)
  })
}

test("lock() on an eval-only backend waits by syncguard's backoff and times out with its message", async () => {
  const key = fresh('eval-lock')
  const mock = sg.createRedisBackend(throughIoredis())
  const ours = sg.createRedisBackend(server.url)
  const held = await ours.acquire({ key, ttlMs: 300 })
  assert.equal(held.ok, true)
  const started = Date.now()
  assert.equal(await sg.lock(mock, () => 'ran', { key, acquisition: { retryDelayMs: 50, timeoutMs: 3000 } }), 'ran')
  assert.ok(Date.now() - started >= 200, 'after the holder expired')
  await ours.acquire({ key, ttlMs: 5000 })
  await assert.rejects(sg.lock(mock, () => 'never', { key, acquisition: { maxRetries: 1, retryDelayMs: 10 } }), {
    code: 'AcquisitionTimeout',
  })
})

test("canned replies: syncguard's arguments are sent, and each reply shape of its mocks is read as it reads it", async () => {
  const expiresAtMs = Date.now() + 30_000
  const mock = canned([1, '000000000000005', expiresAtMs], 1, 0, [0, 100])
  const backend = sg.createRedisBackend(mock, { keyPrefix: 'test' })
  const won = await backend.acquire({ key: 'resource:1', ttlMs: 30_000 })
  assert.deepEqual([won.ok, won.fence, won.expiresAtMs], [true, '000000000000005', expiresAtMs])
  const [script, count, lockKey, indexKey, fenceKey, lockId, ttl, stored] = mock.sent[0]
  assert.equal(typeof script, 'string')
  assert.match(script, /cjson/)
  assert.deepEqual([count, lockKey, ttl, stored, lockId], [3, 'test:resource:1', '30000', 'test:resource:1', won.lockId])
  assert.equal(indexKey, `test:id:${won.lockId}`)
  assert.equal(fenceKey, 'test:fence:test:resource:1')
  const bare = await backend.acquire({ key: 'resource:2', ttlMs: 5000 })
  assert.deepEqual([bare.ok, bare.fence], [true, '000000000000001'], "a bare 1: won, fence 1, as syncguard's mock branch")
  assert.ok(Math.abs(bare.expiresAtMs - Date.now() - 5000) < 1000)
  assert.deepEqual(plain(await backend.acquire({ key: 'resource:3', ttlMs: 5000 })), { ok: false, reason: 'locked' })
  assert.equal((await backend.acquire({ key: 'resource:3', ttlMs: 5000 })).reason, 'locked')

  const releases = canned(1, -1, -2, 0, [1, 'test:k'])
  const other = sg.createRedisBackend(releases, { keyPrefix: 'test' })
  const events = []
  const watched = sg.withTelemetry(other, { onEvent: (event) => events.push(event.reason ?? event.result) })
  for (let i = 0; i < 5; i++) await watched.release({ lockId: LOCK_ID })
  assert.deepEqual(events, ['ok', 'not-found', 'expired', 'not-found', 'ok'])
  assert.deepEqual(releases.sent[0].slice(1), [1, `test:id:${LOCK_ID}`, LOCK_ID])

  const extends_ = canned([1, 1234], 1, 0)
  const third = sg.createRedisBackend(extends_, { keyPrefix: 'test' })
  assert.deepEqual(await third.extend({ lockId: LOCK_ID, ttlMs: 120_000 }), { ok: true, expiresAtMs: 1234 })
  assert.deepEqual(extends_.sent[0].slice(1), [1, `test:id:${LOCK_ID}`, LOCK_ID, '120000'])
  const bareExtend = await third.extend({ lockId: LOCK_ID, ttlMs: 60_000 })
  assert.ok(bareExtend.ok && Math.abs(bareExtend.expiresAtMs - Date.now() - 60_000) < 1000)
  assert.deepEqual(plain(await third.extend({ lockId: LOCK_ID, ttlMs: 1000 })), { ok: false })

  const reads = canned(1, 0, null, JSON.stringify({ lockId: LOCK_ID, key: 'k', fence: '000000000000009', expiresAtMs: 9, acquiredAtMs: 1 }))
  const fourth = sg.createRedisBackend(reads, { keyPrefix: 'test', cleanupInIsLocked: true })
  assert.equal(await fourth.isLocked({ key: 'k' }), true)
  assert.equal(await fourth.isLocked({ key: 'k' }), false)
  assert.deepEqual(reads.sent[0].slice(1), [1, 'test:k', 'test', 'true'])
  assert.equal(await fourth.lookup({ key: 'k' }), null)
  const info = await fourth.lookup({ lockId: LOCK_ID })
  assert.deepEqual([info.fence, info.keyHash, info.lockIdHash], ['000000000000009', sg.hashKey('k'), sg.hashKey(LOCK_ID)])
})

test('canned failures: bad input before eval, its errors by their text, an unanswered eval bounded, a reply none of ours gives', async () => {
  const mock = canned(new Error('ECONNREFUSED: Connection refused'), new Error('NOAUTH Authentication required'), 'what', [1])
  const backend = sg.createRedisBackend(mock, { commandTimeoutMs: 100 })
  await assert.rejects(backend.release({ lockId: '' }), { code: 'InvalidArgument' })
  await assert.rejects(backend.acquire({ key: '', ttlMs: 10 }), { code: 'InvalidArgument' })
  await assert.rejects(backend.extend({ lockId: LOCK_ID, ttlMs: 0 }), { code: 'InvalidArgument' })
  assert.equal(mock.sent.length, 0, 'refused before any eval')
  await assert.rejects(backend.acquire({ key: 'k', ttlMs: 10 }), { code: 'ServiceUnavailable', message: /ECONNREFUSED/ })
  await assert.rejects(backend.isLocked({ key: 'k' }), { code: 'AuthFailed', message: /NOAUTH/ })
  await assert.rejects(backend.acquire({ key: 'k', ttlMs: 10 }), { name: 'LockError', code: 'Internal' })
  await assert.rejects(backend.extend({ lockId: LOCK_ID, ttlMs: 10 }), { name: 'LockError', code: 'Internal' })

  const silent = sg.createRedisBackend({ eval: () => new Promise(() => {}) }, { commandTimeoutMs: 50 })
  const started = Date.now()
  await assert.rejects(silent.isLocked({ key: 'k' }), { code: 'NetworkTimeout' })
  assert.ok(Date.now() - started < 2000)
  const throwing = sg.createRedisBackend({ eval: () => { throw new Error('WRONGTYPE Operation') } })
  await assert.rejects(throwing.lookup({ key: 'k' }), { code: 'InvalidArgument', message: /WRONGTYPE/ })
})

/** An eval that runs each script on the server at once, but answers the first only after `lateMs`. */
function answeringFirstLate(lateMs) {
  const sent = []
  return {
    sent,
    eval: (...args) => {
      sent.push(args)
      const ran = ioredis.eval(...args)
      if (sent.length > 1) return ran
      return ran.then((reply) => new Promise((resolve) => setTimeout(() => resolve(reply), lateMs)))
    },
  }
}

/** Resolves once `test()` holds, or after `ms`. */
async function until(test, ms = 5000) {
  const deadline = Date.now() + ms
  while (!(await test()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
}

test('an acquire that timed out and then won is released once its reply comes; one that found the lock held sends nothing more', async () => {
  const key = fresh('late')
  const late = answeringFirstLate(300)
  const backend = sg.createRedisBackend(late, { commandTimeoutMs: 50 })
  await assert.rejects(backend.acquire({ key, ttlMs: 60_000 }), { code: 'NetworkTimeout' })
  const record = JSON.parse(await ioredis.get(`syncguard:${key}`))
  const [, , , , , lockId] = late.sent[0]
  assert.equal(record.lockId, lockId, 'the attempt ran and took the lock')
  await until(async () => (await ioredis.exists(`syncguard:${key}`)) === 0)
  assert.equal(await ioredis.exists(`syncguard:${key}`), 0, 'freed when the late reply came, not left to its TTL')
  assert.equal(await ioredis.exists(`syncguard:id:${lockId}`), 0)
  assert.equal(late.sent.length, 2, 'the acquire, then its release')
  assert.deepEqual(late.sent[1].slice(1, 3), [1, `syncguard:id:${lockId}`])

  const holder = sg.createRedisBackend(throughIoredis())
  const held = await holder.acquire({ key, ttlMs: 60_000 })
  assert.equal(held.ok, true)
  const refused = answeringFirstLate(300)
  const second = sg.createRedisBackend(refused, { commandTimeoutMs: 50 })
  await assert.rejects(second.acquire({ key, ttlMs: 60_000 }), { code: 'NetworkTimeout' })
  await new Promise((resolve) => setTimeout(resolve, 600))
  assert.equal(refused.sent.length, 1, 'a late "held" releases nothing')
  assert.equal(JSON.parse(await ioredis.get(`syncguard:${key}`)).lockId, held.lockId)
  assert.deepEqual(await held.release(), { ok: true })
})
