'use strict'

// A Redlock over 5 independent redis-servers, through every public API: input refused before
// any Redis call; syncguard's backend calls each settled on a quorum; 4 processes keep an
// exact counter (DistributedLock `using` and `waitForLock`, ExclusiveLock,
// DistributedLockService, syncguard's lock(fn)) with fences that strictly increase across
// processes; nodes given as clients of either kind and options objects reach all 5;
// 2 of 5 servers killed: still works; 3 of 5 killed: holders told, and
// acquisitions fail fast with the quorum error, never "held". The servers are killed by pid,
// in this order, so the tests run in file order.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { startChild, killAll } = require('./helpers/child')
const { refused } = require('./helpers/refused')
const { startRedis } = require('./helpers/redis-server')
const { DistributedLock, ExclusiveLock, DistributedLockService, LockLostError } = require('..')
const syncguard = require('../syncguard')

const FIXTURE = path.join(__dirname, 'fixtures', 'redlock-increment.js')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let servers = []
let urls = []
let counter
const children = new Set()

before(async () => {
  servers = await Promise.all(Array.from({ length: 5 }, () => startRedis()))
  urls = servers.map((server) => server.url)
  counter = new Redis(urls[0])
})

after(async () => {
  killAll(children)
  counter?.disconnect()
  await Promise.all(servers.map((server) => server.close()))
})

describe('input over an array is refused before any Redis call, naming the argument', () => {
  // Nothing listens on port 1: a call to it would fail differently.
  const nowhere = (n) => Array.from({ length: n }, (_, i) => `redis://127.0.0.1:${i + 1}`)

  test('fewer than 3 nodes, on every API', () => {
    const err = refused(() => new DistributedLock(nowhere(2)), 'redis')
    assert.match(err.message, /^redis must name at least 3 Redis servers for a Redlock.*got 2/)
    refused(() => new DistributedLock([]), 'redis')
    const exclusive = refused(() => new ExclusiveLock({ name: 'x', cache_connection: nowhere(1) }), 'cache_connection')
    assert.match(exclusive.message, /cache_connection must name at least 3/)
    const service = refused(() => new DistributedLockService('x', 1000, nowhere(2)), 'cacheInstance')
    assert.match(service.message, /cacheInstance must name at least 3/)
  })

  test('the same server twice, a memory:// node, a nested array, a bad node', () => {
    const same = refused(() => new DistributedLock([...nowhere(3), 'redis://127.0.0.1:2']), 'redis[3]')
    assert.match(same.message, /^redis\[3\] names the same server as an earlier node/)
    // A client and a URL for one server, written differently: localhost is the loopback.
    const client = new Redis({ host: 'localhost', port: 1, lazyConnect: true })
    const alias = refused(() => new DistributedLock([client, 'redis://127.0.0.2:1', 'redis://127.0.0.1:1/3']), 'redis[2]')
    assert.match(alias.message, /^redis\[2\] names the same server as an earlier node/)
    assert.equal(client.status, 'wait', 'the client was not connected')
    const memory = refused(() => new DistributedLock(['redis://127.0.0.1:1', 'memory://m', 'redis://127.0.0.1:3']), 'redis[1]')
    assert.match(memory.message, /redis\[1\] must be a Redis server/)
    refused(() => new DistributedLock([...nowhere(2), ['redis://127.0.0.1:3']]), 'redis[2]')
    refused(() => new DistributedLock([...nowhere(2), { host: '127.0.0.1', port: 70000 }]), 'redis[2].port')
    const scheme = refused(() => new DistributedLock([...nowhere(2), 'http://u:secret@127.0.0.1:3']), 'redis[2]')
    assert.doesNotMatch(scheme.message, /secret/)
    refused(() => new ExclusiveLock({ name: 'x', cache_connection: [...nowhere(2), 'memory://m'] }), 'cache_connection[2]')
  })

  test('fencedSet over a Redlock is refused naming fencedSet, and writes nothing', async () => {
    const lock = new DistributedLock(urls, { keyPrefix: 'rl-fs:' })
    const handle = await lock.acquire('k', 5000)
    try {
      await assert.rejects(lock.fencedSet('balance', '120', handle.fence), (err) => {
        assert.equal(err.code, 'EINVAL')
        assert.match(err.message, /^fencedSet is not available over a Redlock/)
        return true
      })
      for (const url of urls) {
        const raw = new Redis(url)
        try {
          assert.equal(await raw.exists('balance', 'rl-fs:balance'), 0, url)
        } finally {
          raw.disconnect()
        }
      }
    } finally {
      await handle.release()
    }
  })

  test('fair: true over a Redlock, naming options.fair', () => {
    const err = refused(() => new DistributedLock(nowhere(3), { fair: true }), 'options.fair')
    assert.match(err.message, /^options\.fair is not supported over several Redis servers \(Redlock\)/)
  })

  test('cluster clients and nodes of different ioredis keyPrefix', () => {
    const cluster = new Redis.Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
    const err = refused(() => new DistributedLock([...nowhere(2), cluster]), 'redis[2]')
    assert.match(err.message, /Cluster/)
    const clients = [1, 2, 3].map((port, i) => new Redis({ port, lazyConnect: true, keyPrefix: i === 2 ? 'b:' : 'a:' }))
    const prefix = refused(() => new DistributedLock(clients), 'redis[2]')
    assert.match(prefix.message, /keyPrefix "b:" but redis\[0\] has "a:"/)
    for (const client of clients) assert.equal(client.status, 'wait', 'the clients were not connected')
  })

  test("syncguard's createRedisBackend: a refused node is InvalidArgument naming it", () => {
    let caught
    try {
      syncguard.createRedisBackend([urls[0], urls[1], urls[0]])
    } catch (err) {
      caught = err
    }
    assert.ok(caught instanceof syncguard.LockError, String(caught))
    assert.equal(caught.code, 'InvalidArgument')
    assert.match(caught.message, /^redis\[2\] names the same server as an earlier node/)
    assert.throws(() => syncguard.createRedisBackend(urls.slice(0, 2)), (err) => err.code === 'InvalidArgument' && /at least 3/.test(err.message))
  })
})

describe("syncguard's entry on the 5 servers", () => {
  /** syncguard's record of `key` on each server (its storage key with the default prefix). */
  const records = (key) => Promise.all(servers.map(async (server) => {
    const raw = new Redis(server.url)
    try {
      const json = await raw.get(`syncguard:${key}`)
      return json === null ? null : JSON.parse(json)
    } finally {
      raw.disconnect()
    }
  }))

  test('acquire, contention, isLocked, lookups, extend and release, each settled on a quorum', async () => {
    const backend = syncguard.createRedisBackend(urls)
    const won = await backend.acquire({ key: 'sg-rl', ttlMs: 10_000 })
    assert.equal(won.ok, true)
    assert.match(won.fence, /^\d{15}$/)
    for (const record of await records('sg-rl')) {
      assert.equal(record?.lockId, won.lockId, 'the same lockId on every node')
      assert.equal(record.fence, won.fence, 'the fence returned is the one written')
    }
    const other = await backend.acquire({ key: 'sg-rl', ttlMs: 10_000 })
    assert.equal(other.ok, false)
    assert.equal(other.reason, 'locked')
    assert.equal(await backend.isLocked({ key: 'sg-rl' }), true)
    const byKey = await backend.lookup({ key: 'sg-rl' })
    assert.equal(byKey.fence, won.fence)
    assert.equal(byKey.lockIdHash, syncguard.hashKey(won.lockId))
    const raw = await syncguard.getByIdRaw(backend, won.lockId)
    assert.equal(raw.lockId, won.lockId)
    assert.equal(await syncguard.owns(backend, won.lockId), true)
    const extended = await won.extend(60_000)
    assert.equal(extended.ok, true)
    assert.ok(Math.abs(extended.expiresAtMs - Date.now() - 60_000) < 1_000, `${extended.expiresAtMs}`)
    for (const record of await records('sg-rl')) assert.equal(record.expiresAtMs > Date.now() + 50_000, true)
    assert.equal((await won.release()).ok, true)
    assert.deepEqual(await records('sg-rl'), [null, null, null, null, null])
    assert.equal(await backend.isLocked({ key: 'sg-rl' }), false)
    assert.equal(await backend.lookup({ key: 'sg-rl' }), null)
    assert.equal((await backend.release({ lockId: won.lockId })).ok, false)
    const createLock = syncguard.createLock(urls)
    assert.equal(await createLock(async () => backend.isLocked({ key: 'sg-rl' }), { key: 'sg-rl' }), true)
  })

  test('held on a majority by another lockId: acquire answers locked and no node keeps ours', async () => {
    const raws = servers.map((server) => new Redis(server.url))
    try {
      const record = { lockId: 'B'.repeat(22), expiresAtMs: Date.now() + 60_000, acquiredAtMs: Date.now(), key: 'sg-maj', fence: '000000000000001' }
      await Promise.all(raws.slice(0, 3).map((raw) => raw.set('syncguard:sg-maj', JSON.stringify(record), 'PX', 60_000)))
      const backend = syncguard.createRedisBackend(urls)
      const lost = await backend.acquire({ key: 'sg-maj', ttlMs: 10_000 })
      assert.equal(lost.ok, false)
      assert.equal(lost.reason, 'locked')
      // The nodes the failure did not wait for are freed by a release of their own.
      const deadline = Date.now() + 3_000
      let kept
      do {
        kept = (await records('sg-maj')).filter((r) => r !== null && r.lockId !== record.lockId)
        if (kept.length > 0) await sleep(10)
      } while (kept.length > 0 && Date.now() < deadline)
      assert.deepEqual(kept, [], 'a node keeps our record')
      const lookup = await backend.lookup({ key: 'sg-maj' })
      assert.equal(lookup.lockIdHash, syncguard.hashKey(record.lockId), 'what the majority holds')
    } finally {
      for (const raw of raws) raw.disconnect()
    }
  })
})

/** A child node process running the fixture, whose stdout lines are collected. */
const child = (env) => startChild(FIXTURE, env, children)

describe('4 processes on one key keep an exact counter', () => {
  const PROCESSES = 4
  const ITERATIONS = 40

  /** Runs PROCESSES children with `apis[i]`, released together; their critical sections. */
  async function run(name, apis) {
    const keys = { LOCK_KEY: `rl:${name}`, COUNTER_KEY: `rl:${name}:counter`, GO_KEY: `rl:${name}:go` }
    const env = { NODES: JSON.stringify(urls), COUNTER_URL: urls[0], ITERATIONS: String(ITERATIONS), ...keys }
    const kids = apis.map((api) => child({ ...env, API: api }))
    await Promise.all(kids.map((kid) => kid.ready))
    await counter.rpush(keys.GO_KEY, ...kids.map((_, i) => `go-${i}`))
    const codes = await Promise.all(kids.map((kid) => kid.exited))
    codes.forEach((code, i) => assert.equal(code, 0, `child ${i} (${apis[i]}) failed: ${kids[i].stderr}`))
    assert.equal(Number(await counter.get(keys.COUNTER_KEY)), PROCESSES * ITERATIONS, 'an update was lost')
    const sections = kids.flatMap((kid) => JSON.parse(kid.lines.find((line) => line.startsWith('{'))).sections)
    assert.equal(sections.length, PROCESSES * ITERATIONS)
    // The counter value each section wrote orders the sections: one per value, 1..N.
    sections.sort((a, b) => a[0] - b[0])
    sections.forEach(([value], i) => assert.equal(value, i + 1))
    return sections
  }

  /** Fences in the order of the sections (one process after another) strictly increase. */
  function assertIncreasing(sections) {
    const fences = sections.map(([, fence]) => BigInt(fence))
    fences.forEach((fence, i) => {
      if (i > 0) assert.ok(fence > fences[i - 1], `section ${i + 1} got fence ${fence} after ${fences[i - 1]}`)
    })
  }

  test('DistributedLock: 2 processes with using, 2 with waitForLock; fences strictly increase', async () => {
    assertIncreasing(await run('distributed', ['using', 'wait', 'using', 'wait']))
  })

  test('ExclusiveLock; fences strictly increase', async () => {
    assertIncreasing(await run('exclusive', ['exclusive', 'exclusive', 'exclusive', 'exclusive']))
  })

  test('DistributedLockService (maestro)', async () => {
    await run('maestro', ['maestro', 'maestro', 'maestro', 'maestro'])
  })

  test("syncguard's lock(fn); fences (read by a lookup inside fn) strictly increase", async () => {
    assertIncreasing(await run('syncguard', ['syncguard', 'syncguard', 'syncguard', 'syncguard']))
  })
})

test('nodes given as an ioredis client, a node-redis client, an options object and URLs: acquire and release reach all 5', async () => {
  // Neither client is connected by the test: each is read for its server's address.
  const ioredis = new Redis(urls[0], { lazyConnect: true })
  const nodeRedis = createClient({ url: urls[1] })
  const nodes = [ioredis, nodeRedis, { host: '127.0.0.1', port: servers[2].port }, urls[3], urls[4]]
  const raw = urls.map((url) => new Redis(url))
  const values = () => Promise.all(raw.map((client) => client.get('rl-shapes:k')))
  /** Until `done(values)`, for at most 2 s; the last values read. */
  const until = async (done) => {
    const deadline = Date.now() + 2000
    let seen = await values()
    while (!done(seen) && Date.now() < deadline) {
      await sleep(10)
      seen = await values()
    }
    return seen
  }
  try {
    const locks = new DistributedLock(nodes, { keyPrefix: 'rl-shapes:' })
    // An acquisition wins on a quorum and gives the others a short grace: a node whose
    // connection was still opening may never get the command. Taken until all 5 hold it,
    // which shows every node's shape reached its own server.
    let handle
    let seen
    for (let tries = 0; tries < 5; tries++) {
      handle = await locks.acquire('k', 10_000)
      seen = await until((tokens) => tokens.every((token) => token === handle.token))
      if (seen.every((token) => token === handle.token)) break
      await handle.release()
    }
    seen.forEach((token, i) => assert.equal(token, handle.token, `node ${i} does not hold the token`))
    // The same 5 servers named by URL only see the lock held.
    const byUrl = new DistributedLock(urls, { keyPrefix: 'rl-shapes:' })
    assert.equal(await byUrl.tryAcquire('k', 1000), null)
    assert.equal(await locks.isLocked('k'), true)
    await handle.release()
    const left = await until((tokens) => tokens.every((token) => token === null))
    assert.deepEqual(left, [null, null, null, null, null], 'released on every node')
    const next = await byUrl.acquire('k', 10_000)
    assert.ok(BigInt(next.fence) > BigInt(handle.fence), `${next.fence} after ${handle.fence}`)
    await next.release()

    const exclusive = new ExclusiveLock({ name: 'rl-shapes', cache_connection: nodes, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
    assert.equal(await exclusive.acquire(), true)
    const other = new ExclusiveLock({ name: 'rl-shapes', cache_connection: urls, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
    assert.equal(await other.acquire(), false, 'held on a quorum of the same servers')
    await exclusive.release()
    assert.equal(await other.acquire(), true)
    await other.release()
    assert.equal(ioredis.status, 'wait', 'the ioredis client was not connected')
    assert.equal(nodeRedis.isOpen, false, 'the node-redis client was not connected')
  } finally {
    ioredis.disconnect()
    for (const client of raw) client.disconnect()
  }
})

describe('servers killed', () => {
  const lock = () => new DistributedLock(urls, { connectTimeoutMs: 500, commandTimeoutMs: 500 })

  test('2 of 5 killed (by pid): locks still work, fences still increase', async () => {
    const locks = lock()
    const first = await locks.acquire('rl:survive', 2000)
    await first.release()
    await Promise.all([servers[3].kill(), servers[4].kill()])
    const second = await locks.acquire('rl:survive', 2000)
    assert.ok(BigInt(second.fence) > BigInt(first.fence), `${second.fence} after ${first.fence}`)
    assert.equal(await locks.isLocked('rl:survive'), true)
    assert.equal(await locks.tryAcquire('rl:survive', 2000), null, 'held by a quorum of the 3 left')
    await second.release()
    assert.equal(await locks.isLocked('rl:survive'), false)
    assert.equal(await locks.using('rl:survive', (handle) => handle.isHeld), true)
    const exclusive = new ExclusiveLock({ name: 'rl-survive', cache_connection: urls, lock_ttl_ms: 2000, lock_refresh_ms: 500 })
    assert.equal(await exclusive.acquire(), true)
    await exclusive.release()
    const backend = syncguard.createRedisBackend(urls, { commandTimeoutMs: 500 })
    const won = await backend.acquire({ key: 'sg-survive', ttlMs: 2000 })
    assert.equal(won.ok, true)
    assert.equal((await backend.acquire({ key: 'sg-survive', ttlMs: 2000 })).ok, false)
    assert.equal(await backend.isLocked({ key: 'sg-survive' }), true)
    assert.equal((await won.extend(2000)).ok, true)
    assert.equal((await won.release()).ok, true)
    assert.equal(await syncguard.lock(backend, async () => 'ran', { key: 'sg-survive' }), 'ran')
  })

  test('3 of 5 killed: holders told (onLost, error), acquire fails fast naming how many answered', async () => {
    const locks = lock()
    let onLost
    let toldAt
    const told = new Promise((resolve) => {
      onLost = (err) => {
        toldAt = Date.now()
        resolve(err)
      }
    })
    const held = await locks.acquire('rl:lost', 1500, { autoRefresh: true, onLost })
    const exclusive = new ExclusiveLock({ name: 'rl-lost', cache_connection: urls, lock_ttl_ms: 1500, lock_refresh_ms: 500 })
    // Every error is listened to: after the loss, the automatic release fails too (no quorum).
    const errors = []
    const errored = new Promise((resolve) => exclusive.on('error', (err) => errors.push(err) === 1 && resolve(err)))
    assert.equal(await exclusive.acquire(), true)
    const killedAt = Date.now()
    await servers[2].kill()

    const lost = await Promise.race([told, sleep(5000).then(() => null)])
    assert.ok(lost instanceof LockLostError, `onLost not called within 5 s: ${lost}`)
    assert.equal(await held.lost, lost)
    // Told before the lock could have expired on the nodes: its TTL counted from the last
    // refresh sent (expiresAt) had not run out.
    assert.ok(toldAt <= held.info.expiresAt, `told ${toldAt - held.info.expiresAt} ms after the lock's end`)
    const exclusiveLost = await Promise.race([errored, sleep(5000).then(() => null)])
    assert.ok(exclusiveLost instanceof LockLostError, `ExclusiveLock emitted no error within 5 s: ${exclusiveLost}`)
    assert.ok(Date.now() - killedAt < 6000)

    for (const key of ['rl:lost', 'rl:fresh']) {
      const started = Date.now()
      const err = await locks.acquire(key, 2000).then(
        () => assert.fail('acquired without a quorum'),
        (e) => e,
      )
      const took = Date.now() - started
      assert.notEqual(err.code, 'ELOCKED', `a quorum failure reported as held: ${err.message}`)
      assert.equal(err.code, 'ECONNECTION', err.stack)
      assert.match(err.message, /2 of 5 Redlock nodes answered; a quorum is 3/)
      assert.ok(took < 3000, `acquire took ${took} ms to fail`)
    }
    const service = new DistributedLockService('rl:lost-service', 2000, urls, { logger: { error() {}, warn() {}, info() {}, debug() {} } })
    assert.equal(await service.acquire(2000, 200), false)
    // ExclusiveLock's acquire: the quorum error, never false ("held by someone").
    const fresh = new ExclusiveLock({ name: 'rl-lost-fresh', cache_connection: urls, lock_ttl_ms: 2000, lock_refresh_ms: 500 })
    const exStarted = Date.now()
    const exErr = await fresh.acquire().then(
      (won) => assert.fail(`ExclusiveLock.acquire() answered ${won} without a quorum`),
      (e) => e,
    )
    assert.equal(exErr.code, 'ECONNECTION', exErr.stack)
    assert.match(exErr.message, /2 of 5 Redlock nodes answered; a quorum is 3/)
    assert.ok(Date.now() - exStarted < 3000, `ExclusiveLock.acquire() took ${Date.now() - exStarted} ms to fail`)

    // syncguard's entry: a LockError ServiceUnavailable naming how many answered, never "locked".
    const backend = syncguard.createRedisBackend(urls, { commandTimeoutMs: 500 })
    for (const call of [
      () => backend.acquire({ key: 'sg-lost', ttlMs: 2000 }),
      () => backend.isLocked({ key: 'sg-lost' }),
      () => backend.lookup({ key: 'sg-lost' }),
      () => syncguard.lock(backend, async () => assert.fail('ran without a quorum'), { key: 'sg-lost' }),
    ]) {
      const started = Date.now()
      const err = await call().then(
        (result) => assert.fail(`answered without a quorum: ${JSON.stringify(result)}`),
        (e) => e,
      )
      const took = Date.now() - started
      assert.ok(err instanceof syncguard.LockError, String(err))
      assert.equal(err.code, 'ServiceUnavailable', err.message)
      assert.match(err.message, /2 of 5 Redlock nodes answered; a quorum is 3/)
      assert.ok(took < 3000, `took ${took} ms to fail`)
    }
  })
})
