'use strict'

// A Sentinel set (1 master, 1 replica, 3 sentinels, real processes) through every public API
// and every way of naming it: a redis+sentinel:// URL, `{ sentinels, name }`, an ioredis
// client made with `sentinels`. Each lock's key (DistributedLock's `lock:<key>`) is asserted
// on the master; a waiter is woken
// by the release (a 5 s poll would be too late). Refusals name the argument.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { RedisSentinelSet } = require('./helpers/redis-sentinel')
const { recorder, checkObserved, checkServiceTurns, debugTrace } = require('./helpers/observed')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('..')
const syncguard = require('../syncguard')

let set
let master
let replica
const ioredisClients = []
const quiet = { error() {}, warn() {}, info() {}, debug() {} }

before(async () => {
  set = await RedisSentinelSet.start()
  const port = await set.masterPort()
  master = set.client(port)
  replica = set.client(set.servers.find((s) => s.port !== port).port)
})

after(async () => {
  for (const c of ioredisClients) c.disconnect()
  await set?.close()
})

/** The three ways of naming the set. */
function forms() {
  const client = new Redis({ ...set.options, lazyConnect: true })
  ioredisClients.push(client)
  return [['url', set.url], ['options', set.options], ['ioredis', client]]
}

test('DistributedLock: acquire, isLocked, extend, release on the master, by URL, options and ioredis client', async () => {
  for (const [form, redis] of forms()) {
    const locks = new DistributedLock(redis)
    const key = `sn:dl:${form}`
    const handle = await locks.acquire(key, 5000)
    assert.ok(await master.pttl(`lock:${key}`) > 0, `${form}: the key is on the master`)
    assert.equal(await locks.isLocked(key), true)
    await handle.extend(5000)
    await handle.release()
    assert.equal(await master.exists(`lock:${key}`), 0, `${form}: released on the master`)
  }
})

test('DistributedLock: a waiter is woken by the release, not by its poll', async () => {
  const locks = new DistributedLock(set.url, { retryDelayMs: 5000 })
  const held = await locks.acquire('sn:wake', 10_000)
  const started = Date.now()
  const waiting = locks.waitForLock('sn:wake', 8000, 5000)
  await new Promise((resolve) => setTimeout(resolve, 300))
  await held.release()
  const got = await waiting
  const waited = Date.now() - started
  assert.ok(waited < 3000, `woken after ${waited} ms (the poll is 5 s)`)
  await got.release()
})

test('ExclusiveLock, DistributedLockService and syncguard keep their keys on the master, by URL, options and ioredis client', async () => {
  for (const [form, redis] of forms()) {
    const exclusive = new ExclusiveLock({ name: `sn-ex-${form}`, cache_connection: redis, lock_ttl_ms: 3000, lock_refresh_ms: 1000 })
    assert.equal(await exclusive.acquire(), true, form)
    assert.ok((await master.keys(`*sn-ex-${form}*`)).length > 0, `${form}: the exclusive lock is on the master`)
    await exclusive.release()

    const service = new DistributedLockService(`sn:service:${form}`, 3000, redis, { logger: quiet })
    assert.equal(await service.acquire(3000, 200), true, form)
    assert.ok(await master.pttl(`sn:service:${form}`) > 0, `${form}: the service lock is on the master`)
    await service.release()
    assert.equal(await master.exists(`sn:service:${form}`), 0)
  }

  for (const [form, redis] of forms()) {
    const store = syncguard.createRedisBackend(redis)
    const key = `sn:sg:${form}`
    const won = await store.acquire({ key, ttlMs: 5000 })
    assert.equal(won.ok, true, form)
    assert.equal(await store.isLocked({ key }), true)
    assert.ok((await master.keys(`*${key}*`)).length > 0, `${form}: syncguard's keys are on the master`)
    await store.release({ lockId: won.lockId })
    assert.equal(await store.isLocked({ key }), false)
  }
})

test('the replica holds what the master does (replicated), and no lock is ever taken there', async () => {
  const locks = new DistributedLock(set.options)
  const handle = await locks.acquire('sn:replicated', 5000)
  await master.call('WAIT', '1', '2000')
  assert.ok(await replica.pttl('lock:sn:replicated') > 0, 'the replica has the key by replication')
  await handle.release()
})

test('refusals name the argument, before any call', () => {
  const refused = (fn, argument) => {
    let caught
    try {
      fn()
    } catch (err) {
      caught = err
    }
    assert.ok(caught, `nothing refused (${argument})`)
    assert.equal(caught.code, 'EINVAL', caught.stack)
    assert.equal(caught.argument, argument, caught.message)
    assert.ok(!caught.message.includes('hunter2'), caught.message)
  }
  const sentinels = [{ host: '127.0.0.1', port: 1 }]
  refused(() => new DistributedLock({ sentinels, name: 'm', role: 'slave', password: 'hunter2' }), 'redis.role')
  refused(() => new DistributedLock({ sentinels }), 'redis.name')
  refused(() => new DistributedLock({ sentinels: [], name: 'm' }), 'redis.sentinels')
  refused(() => new DistributedLock({ sentinels: [{ host: '127.0.0.1', port: 70000 }], name: 'm' }), 'redis.sentinels[0].port')
  refused(() => new DistributedLock({ sentinels, name: 'm', host: 'x' }), 'redis.host')
  refused(() => new DistributedLock({ sentinels, name: 'm', cluster: ['127.0.0.1:2'] }), 'redis.cluster')
  const slave = new Redis({ sentinels, name: 'm', role: 'slave', lazyConnect: true })
  ioredisClients.push(slave)
  refused(() => new DistributedLock(slave), 'role')
  refused(() => new DistributedLock({ sentinels, name: 'm', tls: true }), 'redis.sentinelTLS')
  // One TLS setting serves both: a CA of the sentinels' own would be dropped unseen.
  refused(() => new DistributedLock({ sentinels, name: 'm', tls: { ca: 'one' }, sentinelTLS: { ca: 'other' } }), 'redis.sentinelTLS')
  refused(() => new DistributedLock('redis+sentinel://127.0.0.1:1'), 'redis')
})

test('sentinels that do not know the name: a connection error naming the sentinels, never a hang', async () => {
  const locks = new DistributedLock({ ...set.options, name: 'nosuchmaster' }, { connectTimeoutMs: 1000 })
  const started = Date.now()
  const err = await locks.acquire('sn:nowhere', 1000).then(() => null, (e) => e)
  assert.ok(err, 'acquired without a master')
  assert.equal(err.code, 'ECONNECTION', err.stack)
  assert.match(err.message, /nosuchmaster/)
  assert.ok(Date.now() - started < 5000)
})

test('stats() and onEvent through Sentinel: an acquisition, a contended attempt and a release on the master', async () => {
  const events = []
  const locks = new DistributedLock(set.url, { onEvent: (event) => events.push(event) })
  const handle = await locks.acquire('sn:observed', 5000)
  assert.ok(await master.pttl('lock:sn:observed') > 0, 'on the master')
  assert.equal(await locks.tryAcquire('sn:observed', 5000), null)
  await handle.release()
  const stats = locks.stats()
  assert.deepEqual([stats.acquisitions, stats.contended, stats.errors], [1, 1, {}])
  // The contention comes from the native side through the thread's queue: it may come late.
  const deadline = Date.now() + 3000
  while (!events.some((e) => e.type === 'contended') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
  assert.deepEqual(events.map((e) => [e.type, e.key, e.fence]).sort(), [
    ['acquired', 'sn:observed', handle.fence],
    ['contended', 'sn:observed', undefined],
    ['released', 'sn:observed', handle.fence],
  ].sort())
})

test('stats(), onEvent and logger of ExclusiveLock, DistributedLockService and syncguard through Sentinel, on the master', async () => {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
  const seen = recorder()
  const { logger, onEvent } = seen

  const settings = { name: 'sn-observed-ex', cache_connection: set.url, lock_ttl_ms: 5000, lock_refresh_ms: 1000 }
  const exclusive = new ExclusiveLock({ ...settings, onEvent, logger })
  const rival = new ExclusiveLock({ ...settings, onEvent, logger })
  assert.equal(await exclusive.acquire(), true)
  assert.equal(await rival.acquire(), false)
  assert.ok((await master.keys('*sn-observed-ex*')).length > 0, 'on the master')
  await exclusive.release()
  // Each has a hook, so each its own native lock and counts (README "Stats").
  const exStats = exclusive.stats()
  assert.deepEqual([exStats.acquisitions, exStats.contended, exStats.errors], [1, 0, {}], JSON.stringify(exStats))
  const rivalStats = rival.stats()
  assert.deepEqual([rivalStats.acquisitions, rivalStats.contended, rivalStats.errors], [0, 1, {}], JSON.stringify(rivalStats))

  const service = new DistributedLockService('sn:observed-svc', 5000, set.url, { onEvent, logger: quiet })
  const other = new DistributedLockService('sn:observed-svc', 5000, set.url, { logger: quiet })
  await checkServiceTurns(service, other, async () => assert.ok(await master.pttl('sn:observed-svc') > 0, 'on the master'))

  const backend = syncguard.createRedisBackend(set.url, { keyPrefix: 'sn-obs-sg', onEvent, logger })
  const won = await backend.acquire({ key: 'k', ttlMs: 5000 })
  assert.equal(won.ok, true, JSON.stringify(won))
  assert.ok((await master.keys('sn-obs-sg*')).length > 0, 'on the master')
  assert.equal((await backend.acquire({ key: 'k', ttlMs: 5000 })).ok, false)
  await backend.extend({ lockId: won.lockId, ttlMs: 5000 })
  await backend.release({ lockId: won.lockId })
  const sgStats = backend.stats()
  assert.deepEqual([sgStats.acquisitions, sgStats.contended, sgStats.refreshes], [1, 1, 1], JSON.stringify(sgStats))
  const locked = syncguard.createLock(set.url, { keyPrefix: 'sn-obs-sg', onEvent })
  assert.equal(await locked(async () => 7, { key: 'fn' }), 7)
  assert.equal(locked.stats().acquisitions, 1)

  await checkObserved(seen, { exclusiveKey: 'exclusive-lock:sn-observed-ex', serviceKey: 'sn:observed-svc', won })
})

test('DEBUG=native-redis-lock through Sentinel: the master lookup and each call traced, no token', async () => {
  const { token, stderr, traced } = await debugTrace(set.url)
  assert.ok(traced.some((line) => / native-redis-lock sentinel .*\+\d+\.\d\dms /.test(line)), stderr)
  assert.ok(traced.some((line) => /EVALSHA acquire \[debug:k, \{debug:k\}(\\x[0-9a-f]{2})+fence\] \+\d+\.\d\dms ok$/.test(line)), stderr)
  assert.ok(traced.some((line) => / EVALSHA release\w* \[debug:k/.test(line)), stderr)
  assert.ok(!stderr.includes(token), 'the token is never written')
})
