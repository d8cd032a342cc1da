'use strict'

// A Redis Cluster (3 masters, a replica each) started here on loopback, through every public
// API and every way of naming it: a redis+cluster:// URL, { cluster: [...] }, an ioredis
// Cluster, a connected node-redis cluster. Locks on keys of every master land on that master;
// 4 processes keep exact counters over keys of all masters; a release wakes a waiter on each
// master (woken, not polled); auto-refresh keeps locks on each master alive. Nodes are
// stopped by pid.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const Redis = require('ioredis')
const { startChild, killAll } = require('./helpers/child')
const { refused } = require('./helpers/refused')
const { recorder, checkObserved, checkServiceTurns, debugTrace } = require('./helpers/observed')
const { createCluster } = require('redis')
const { RedisCluster } = require('./helpers/redis-cluster')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('..')
const syncguard = require('../syncguard')

const FIXTURE = path.join(__dirname, 'fixtures', 'cluster-increment.js')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let cluster
let masters = []
const children = new Set()
const clients = []

before(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 1 })
  masters = await cluster.masterPorts()
})

after(async () => {
  killAll(children)
  for (const client of clients) {
    try {
      await client.disconnect()
    } catch {}
  }
  await cluster?.close()
})

describe('naming a cluster', () => {
  test('refusals name the argument, before any connection', async () => {
    // Nothing listens on port 1: a connection would fail differently, later.
    const natMap = new Redis.Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true, natMap: () => null })
    assert.match(refused(() => new DistributedLock(natMap), 'redis.natMap').message, /function is not supported/)
    assert.match(refused(() => new DistributedLock({ cluster: [{ host: '127.0.0.1', port: 1 }], db: 1 }), 'db').message, /database 0 only/)
    assert.match(refused(() => new DistributedLock({ cluster: [] }), 'redis.cluster').message, /non-empty array/)
    assert.match(refused(() => new DistributedLock({ cluster: [true] }), 'redis.cluster[0]').message, /port, 'host:port' or \{ host, port \}/)
    const closed = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] })
    assert.match(refused(() => new DistributedLock(closed), 'redis').message, /not connected: await its connect\(\) first/)
    const asNode = refused(() => new DistributedLock(['redis://127.0.0.1:1', 'redis://127.0.0.1:2', cluster.url]), 'redis[2]')
    assert.match(asNode.message, /a Redlock's nodes are independent masters/)
    const clientAsNode = new Redis.Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
    assert.match(refused(() => new DistributedLock(['redis://127.0.0.1:1', 'redis://127.0.0.1:2', clientAsNode]), 'redis[2]').message, /is a Redis Cluster/)
    assert.equal(natMap.status, 'wait', 'the ioredis client was not connected')
  })

  /** Each way of naming the cluster, as DistributedLock's first argument. */
  async function forms() {
    const ioredis = new Redis.Cluster(cluster.seeds.slice(0, 2), { lazyConnect: true })
    const nodeRedis = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${masters[0]}` }] })
    nodeRedis.on('error', () => {})
    await nodeRedis.connect()
    clients.push(ioredis, nodeRedis)
    return {
      url: cluster.url,
      options: { cluster: cluster.seeds.map((s) => `${s.host}:${s.port}`) },
      ioredis,
      'node-redis': nodeRedis,
    }
  }

  test('every form: acquire, isLocked, extend, fencedSet, release on a key of each master, landing there', async () => {
    for (const [form, input] of Object.entries(await forms())) {
      const locks = new DistributedLock(input, { keyPrefix: 'form:' })
      for (const port of masters) {
        const key = await cluster.keyOn(port, `${form}:`, 'form:')
        const handle = await locks.acquire(key, 5000)
        assert.equal(await cluster.command(port, 'GET', `form:${key}`), handle.token, `${form}: the token is on ${port}`)
        assert.equal(await locks.isLocked(key), true)
        await handle.extend(10_000)
        assert.ok(await cluster.command(port, 'PTTL', `form:${key}`) > 10_000, `${form}: extended on ${port}`)
        const resource = `{form:${key}}:resource`
        assert.equal(await locks.fencedSet(resource, 'v', handle.fence), true)
        assert.equal(await cluster.command(port, 'EXISTS', resource), 1, `${form}: the resource is on ${port}`)
        await handle.release()
        assert.equal(await locks.isLocked(key), false, `${form}: released on ${port}`)
      }
    }
  })

  test('ExclusiveLock, DistributedLockService and syncguard on keys of each master', async () => {
    for (const port of masters) {
      const name = await cluster.keyOn(port, 'exclusive-', 'ex:')
      const exclusive = new ExclusiveLock({ name, key_prefix: 'ex', cache_connection: cluster.url, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
      const other = new ExclusiveLock({ name, key_prefix: 'ex', cache_connection: { cluster: cluster.seeds }, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
      assert.equal(await exclusive.acquire(), true)
      assert.equal(await cluster.command(port, 'EXISTS', `ex:${name}`), 1, `the ExclusiveLock is on ${port}`)
      assert.equal(await other.acquire(), false)
      await exclusive.release()
      assert.equal(await cluster.command(port, 'EXISTS', `ex:${name}`), 0)

      const serviceKey = await cluster.keyOn(port, 'service:')
      const service = new DistributedLockService(serviceKey, 5000, cluster.url)
      assert.equal(await service.acquire(5000, 1), true)
      assert.equal(await cluster.command(port, 'EXISTS', serviceKey), 1, `the service's lock is on ${port}`)
      await service.release()
      assert.equal(await cluster.command(port, 'EXISTS', serviceKey), 0)

      // A tagged prefix keeps syncguard's own layout (the untagged one: syncguard-cluster.test.js).
      const tag = await cluster.keyOn(port, 'sg')
      const backend = syncguard.createRedisBackend(cluster.url, { keyPrefix: `{${tag}}` })
      const result = await backend.acquire({ key: 'resource', ttlMs: 5000 })
      assert.equal(result.ok, true, JSON.stringify(result))
      assert.equal(await cluster.command(port, 'EXISTS', `{${tag}}:resource`), 1, `syncguard's record is on ${port}`)
      assert.equal((await backend.isLocked({ key: 'resource' })), true)
      assert.equal((await backend.release({ lockId: result.lockId })).ok, true)
      const locked = await syncguard.lock(backend, async () => 'done', { key: 'resource', ttlMs: 5000 })
      assert.equal(locked, 'done')
    }
  })
  test('an ioredis Cluster and a node-redis cluster client through ExclusiveLock, DistributedLockService and syncguard', async () => {
    const { ioredis, 'node-redis': nodeRedis } = await forms()
    for (const [form, client] of [['ioredis', ioredis], ['node-redis', nodeRedis]]) {
      for (const port of masters) {
        const name = await cluster.keyOn(port, `client-${form}-`, 'ex:')
        const exclusive = new ExclusiveLock({ name, key_prefix: 'ex', cache_connection: client, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
        assert.equal(await exclusive.acquire(), true, `${form}: ExclusiveLock on ${port}`)
        assert.equal(await cluster.command(port, 'EXISTS', `ex:${name}`), 1, `${form}: the ExclusiveLock is on ${port}`)
        await exclusive.release()

        const serviceKey = await cluster.keyOn(port, `client-${form}-service:`)
        const service = new DistributedLockService(serviceKey, 5000, client)
        assert.equal(await service.acquire(5000, 1), true, `${form}: maestro on ${port}`)
        assert.equal(await cluster.command(port, 'EXISTS', serviceKey), 1, `${form}: the service's lock is on ${port}`)
        assert.equal(await service.release(), true)

        const sgKey = await cluster.keyOn(port, `client-${form}-sg:`, 'syncguard:')
        const backend = syncguard.createRedisBackend(client)
        const won = await backend.acquire({ key: sgKey, ttlMs: 5000 })
        assert.equal(won.ok, true, `${form}: syncguard on ${port}: ${JSON.stringify(won)}`)
        assert.equal(await cluster.command(port, 'EXISTS', `syncguard:${sgKey}`), 1, `${form}: syncguard's record is on ${port}`)
        assert.equal(await syncguard.owns(backend, won.lockId), true)
        assert.equal((await backend.release({ lockId: won.lockId })).ok, true)
      }
    }
    assert.equal(ioredis.status, 'wait', 'the ioredis Cluster was not connected by us')
  })
})

/** A child node process running the fixture, whose stdout lines are collected. */
const child = (env) => startChild(FIXTURE, env, children)

test('4 processes keep exact counters over keys of every master; fences strictly increase per key', async () => {
  const ITERATIONS = 5
  const keys = []
  for (const port of masters) {
    for (let i = 0; i < 3; i++) keys.push(await cluster.keyOn(port, `count${i}:`))
  }
  const goKey = 'cluster:go'
  const apis = ['using', 'wait', 'using', 'wait']
  const env = { URL: cluster.url, KEYS: JSON.stringify(keys), ITERATIONS: String(ITERATIONS), GO_KEY: goKey }
  const kids = apis.map((api) => child({ ...env, API: api }))
  await Promise.all(kids.map((kid) => kid.ready))
  await cluster.command(await cluster.masterOf(goKey), 'RPUSH', goKey, ...kids.map((_, i) => `go-${i}`))
  const codes = await Promise.all(kids.map((kid) => kid.exited))
  codes.forEach((code, i) => assert.equal(code, 0, `child ${i} (${apis[i]}) failed: ${kids[i].stderr}`))
  for (const key of keys) {
    const counter = `counter:{${key}}`
    assert.equal(Number(await cluster.command(await cluster.masterOf(counter), 'GET', counter)), apis.length * ITERATIONS, `an update of ${key} was lost`)
    const sections = kids.flatMap((kid) => JSON.parse(kid.lines.find((line) => line.startsWith('{'))).sections[key])
    sections.sort((a, b) => a[0] - b[0])
    sections.forEach(([value], i) => assert.equal(value, i + 1))
    const fences = sections.map(([, fence]) => BigInt(fence))
    fences.forEach((fence, i) => i > 0 && assert.ok(fence > fences[i - 1], `${key}: fence ${fence} after ${fences[i - 1]}`))
  }
})

test('a release wakes a waiter on each master: woken, not polled, and subscribed on that master', async () => {
  // The waiter polls every 10 s: getting the lock within 2 s means a message woke it.
  const holder = new DistributedLock(cluster.url)
  const waiter = new DistributedLock({ cluster: cluster.seeds }, { retryDelayMs: 10_000 })
  for (const port of masters) {
    const key = await cluster.keyOn(port, 'wake:', 'lock:')
    const held = await holder.acquire(key, 30_000)
    const waiting = waiter.waitForLock(key, 8000, 5000)
    const deadline = Date.now() + 3000
    for (;;) {
      const channels = await cluster.command(port, 'PUBSUB', 'SHARDCHANNELS')
      if (channels.some((channel) => channel.includes(key))) break
      assert.ok(Date.now() < deadline, `no sharded subscription on ${port}`)
      await sleep(20)
    }
    const released = Date.now()
    await held.release()
    const won = await waiting
    assert.ok(Date.now() - released < 2000, `woken, not polled: ${Date.now() - released} ms`)
    assert.ok(BigInt(won.fence) > BigInt(held.fence))
    await won.release()
  }
})

test('auto-refresh keeps a lock alive on each master past its TTL', async () => {
  const locks = new DistributedLock(cluster.url)
  const before = {}
  for (const port of masters) before[port] = await evalshaCalls(port)
  const held = []
  for (const port of masters) {
    const key = await cluster.keyOn(port, 'refresh:', 'lock:')
    let lost
    const handle = await locks.acquire(key, 600, { autoRefresh: true, onLost: (err) => { lost = err } })
    held.push({ port, key, handle, lost: () => lost })
  }
  await sleep(2000)
  for (const { port, key, handle, lost } of held) {
    assert.equal(lost(), undefined, `${key} was lost: ${lost()}`)
    assert.equal(await cluster.command(port, 'GET', `lock:${key}`), handle.token, `${key} still ours on ${port}`)
    assert.ok(await cluster.command(port, 'PTTL', `lock:${key}`) > 0)
    assert.ok(await evalshaCalls(port) >= before[port] + 4, `refreshes ran on ${port}`)
    await handle.release()
  }
})

async function evalshaCalls(port) {
  const info = await cluster.command(port, 'INFO', 'commandstats')
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0)
}

test('stats() and onEvent on a cluster: an acquisition, a contended attempt and a release on each master', async () => {
  const events = []
  const locks = new DistributedLock(cluster.url, { keyPrefix: 'observed:', onEvent: (event) => events.push(event) })
  const keys = []
  for (const port of masters) {
    const key = await cluster.keyOn(port, 'observed-', 'observed:')
    const handle = await locks.acquire(key, 5000)
    assert.equal(await locks.tryAcquire(key, 5000), null)
    await handle.release()
    keys.push([key, handle.fence])
  }
  const stats = locks.stats()
  assert.deepEqual([stats.acquisitions, stats.contended, stats.errors], [masters.length, masters.length, {}])
  // The contention comes from the native side through the thread's queue: it may come late.
  const deadline = Date.now() + 3000
  while (events.filter((e) => e.type === 'contended').length < masters.length && Date.now() < deadline) await sleep(10)
  const seen = (type) => events.filter((e) => e.type === type).map((e) => [e.key, e.fence])
  assert.deepEqual(seen('acquired'), keys)
  assert.deepEqual(seen('released'), keys)
  assert.deepEqual(seen('contended').map(([key]) => key), keys.map(([key]) => key))
})

test('stats(), onEvent and logger of ExclusiveLock, DistributedLockService and syncguard on a cluster, on each master', async () => {
  for (const port of masters) {
    const seen = recorder()
    const { logger, onEvent } = seen

    const name = await cluster.keyOn(port, 'observed-ex-', 'obs:')
    const settings = { name, key_prefix: 'obs', cache_connection: cluster.url, lock_ttl_ms: 5000, lock_refresh_ms: 1000 }
    const exclusive = new ExclusiveLock({ ...settings, onEvent, logger })
    const rival = new ExclusiveLock({ ...settings, onEvent, logger })
    assert.equal(await exclusive.acquire(), true)
    assert.equal(await rival.acquire(), false)
    assert.equal(await cluster.command(port, 'EXISTS', `obs:${name}`), 1, `on ${port}`)
    await exclusive.release()
    // Each has a hook, so each its own native lock and counts (README "Stats").
    const exStats = exclusive.stats()
    assert.deepEqual([exStats.acquisitions, exStats.contended, exStats.errors], [1, 0, {}], JSON.stringify(exStats))
    const rivalStats = rival.stats()
    assert.deepEqual([rivalStats.acquisitions, rivalStats.contended, rivalStats.errors], [0, 1, {}], JSON.stringify(rivalStats))

    const serviceKey = await cluster.keyOn(port, 'observed-svc:')
    const service = new DistributedLockService(serviceKey, 5000, cluster.url, { onEvent })
    const other = new DistributedLockService(serviceKey, 5000, cluster.url)
    await checkServiceTurns(service, other, async () => assert.equal(await cluster.command(port, 'EXISTS', serviceKey), 1, `on ${port}`))

    const tag = await cluster.keyOn(port, 'obs-sg')
    const backend = syncguard.createRedisBackend(cluster.url, { keyPrefix: `{${tag}}`, onEvent, logger })
    const won = await backend.acquire({ key: 'k', ttlMs: 5000 })
    assert.equal(won.ok, true, JSON.stringify(won))
    assert.equal(await cluster.command(port, 'EXISTS', `{${tag}}:k`), 1, `on ${port}`)
    assert.equal((await backend.acquire({ key: 'k', ttlMs: 5000 })).ok, false)
    await backend.extend({ lockId: won.lockId, ttlMs: 5000 })
    await backend.release({ lockId: won.lockId })
    const sgStats = backend.stats()
    assert.deepEqual([sgStats.acquisitions, sgStats.contended, sgStats.refreshes], [1, 1, 1], JSON.stringify(sgStats))
    const locked = syncguard.createLock(cluster.url, { keyPrefix: `{${tag}}`, onEvent })
    assert.equal(await locked(async () => 7, { key: 'fn' }), 7)
    assert.equal(locked.stats().acquisitions, 1)

    await checkObserved(seen, { exclusiveKey: `obs:${name}`, serviceKey, won })
  }
})

test('DEBUG=native-redis-lock on a cluster: each call traced with its duration and key names, no token', async () => {
  const { token, stderr, traced } = await debugTrace(cluster.url)
  assert.ok(traced.some((line) => /EVALSHA acquire \[debug:k, \{debug:k\}(\\x[0-9a-f]{2})+fence\] \+\d+\.\d\dms ok$/.test(line)), stderr)
  assert.ok(traced.some((line) => / EVALSHA extend\w* \[debug:k/.test(line)), stderr)
  assert.ok(traced.some((line) => / EVALSHA release\w* \[debug:k/.test(line)), stderr)
  assert.ok(!stderr.includes(token), 'the token is never written')
})
