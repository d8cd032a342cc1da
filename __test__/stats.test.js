'use strict'

// stats() on every API object, on a test redis-server, memory:// and a Redlock of three:
// a scripted sequence and the exact counts it leaves (timed counts, refreshes and losses,
// are asserted as at least what must have happened).
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const path = require('node:path')
const { startRedis } = require('./helpers/redis-server')
const { startChild, killAll } = require('./helpers/child')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('..')
const syncguard = require('../syncguard')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits until `done()` holds, up to `ms` (a refresh due in 300 ms may come late on a loaded machine). */
async function until(done, ms = 3_000) {
  const end = Date.now() + ms
  while (!done() && Date.now() < end) await sleep(10)
}
let servers = []
let seq = 0
const unique = (what) => `stats-${what}-${process.pid}-${++seq}`

before(async () => {
  servers = await Promise.all([startRedis(), startRedis(), startRedis()])
})

after(async () => {
  await Promise.all(servers.map((server) => server.close()))
})

const backends = {
  redis: () => servers[0].url,
  'memory://': () => `memory://${unique('mem')}`,
  redlock: () => servers.map((server) => server.url),
}

function assertShape(stats) {
  for (const name of ['acquisitions', 'contended', 'woken', 'handedOver', 'refreshes', 'lost']) {
    assert.equal(typeof stats[name], 'number', name)
  }
  assert.equal(typeof stats.errors, 'object')
  for (const q of ['p50', 'p99', 'max']) assert.equal(typeof stats.waitMs[q], 'number', q)
  assert.ok(stats.waitMs.p50 <= stats.waitMs.p99 && stats.waitMs.p99 <= stats.waitMs.max)
}

for (const [name, target] of Object.entries(backends)) {
  describe(`stats on ${name}`, () => {
    test('DistributedLock: acquisitions, contention, errors by code and waits, exactly', async () => {
      const lock = new DistributedLock(target(), { keyPrefix: `${unique('dl')}:` })
      assert.deepEqual(lock.stats(), {
        enabled: true, acquisitions: 0, contended: 0, woken: 0, handedOver: 0, refreshes: 0, lost: 0, errors: {},
        waitMs: { p50: 0, p99: 0, max: 0 },
      })
      const first = await lock.acquire('k', 10_000)
      assert.equal(await lock.tryAcquire('k', 10_000), null)
      await assert.rejects(lock.acquire('k', 10_000), { code: 'ELOCKED' })
      await assert.rejects(lock.waitForLock('k', 30, 10_000), { code: 'ELOCKED' })
      await first.extend(1_000)
      let stats = lock.stats()
      assertShape(stats)
      assert.equal(stats.acquisitions, 1)
      assert.equal(stats.refreshes, 1, 'the extend')
      // tryAcquire, acquire and at least the wait's first attempt found it held.
      assert.ok(stats.contended >= 3, `contended ${stats.contended}`)
      assert.deepEqual(stats.errors, { ELOCKED: 2 })
      // A waiter released to: it wins, having waited at least until the release.
      const waiter = lock.waitForLock('k', 5_000, 10_000)
      await sleep(50)
      await first.release()
      const second = await waiter
      stats = lock.stats()
      assert.equal(stats.acquisitions, 2)
      assert.ok(stats.waitMs.max >= 45, `max ${stats.waitMs.max}`)
      assert.ok(stats.woken + stats.handedOver >= 1, 'the release reached the waiter')
      await second.release()
      await assert.rejects(lock.acquire('', 100), { code: 'EINVAL' })
      // Refused before any call: no call ended, nothing counted.
      assert.deepEqual(lock.stats().errors, { ELOCKED: 2 })
    })

    test('DistributedLock autoRefresh: refreshes and a lost lock counted', async (t) => {
      const prefix = `${unique('ar')}:`
      const lock = new DistributedLock(target(), { keyPrefix: prefix })
      const handle = await lock.acquire('k', 300, { autoRefresh: true })
      await until(() => lock.stats().refreshes >= 2)
      assert.ok(lock.stats().refreshes >= 2, `refreshes ${lock.stats().refreshes}`)
      if (name !== 'redis') return handle.release()
      const client = new Redis(servers[0].url)
      t.after(() => client.disconnect())
      await client.del(`${prefix}k`)
      await handle.lost
      assert.equal(lock.stats().lost, 1)
    })

    test('ExclusiveLock: acquisitions, contention, refreshes', async () => {
      const settings = { name: unique('ex'), cache_connection: target(), lock_ttl_ms: 1000, lock_refresh_ms: 300 }
      const a = new ExclusiveLock(settings)
      const b = new ExclusiveLock(settings)
      assert.equal(await a.acquire(), true)
      assert.equal(await b.acquire(), false)
      await until(() => a.stats().refreshes >= 1)
      const stats = a.stats()
      assertShape(stats)
      // a and b share their settings: one native lock counts both.
      assert.equal(stats.acquisitions, 1)
      assert.equal(stats.contended, 1)
      assert.ok(stats.refreshes >= 1, `refreshes ${stats.refreshes}`)
      await a.release()
    })

    test('DistributedLockService: a wait that wins, counted', async () => {
      const url = target()
      const key = unique('svc')
      const one = new DistributedLockService(key, 5_000, url)
      const two = new DistributedLockService(key, 5_000, url)
      assert.equal(await one.acquire(), true)
      const waiting = two.acquire(5_000, 3_000)
      await sleep(50)
      await one.release()
      assert.equal(await waiting, true)
      const stats = two.stats()
      assertShape(stats)
      // Both share the native service of these settings.
      assert.equal(stats.acquisitions, 2)
      assert.ok(stats.contended >= 1)
      assert.ok(stats.waitMs.max >= 45, `max ${stats.waitMs.max}`)
      await two.release()
    })

    test('syncguard backend and createLock', async (t) => {
      // On every target, a Redlock's array of servers too.
      const redis = target()
      const backend = syncguard.createRedisBackend(redis, { keyPrefix: unique('sg') })
      const won = await backend.acquire({ key: 'k', ttlMs: 5_000 })
      assert.equal(won.ok, true)
      assert.equal((await backend.acquire({ key: 'k', ttlMs: 5_000 })).ok, false)
      let stats = backend.stats()
      assertShape(stats)
      assert.equal(stats.acquisitions, 1)
      assert.equal(stats.contended, 1)
      await backend.extend({ lockId: won.lockId, ttlMs: 5_000 })
      assert.equal(backend.stats().refreshes, 1)
      await backend.release({ lockId: won.lockId })
      const locked = syncguard.createLock(redis, { keyPrefix: unique('sgl') })
      assert.equal(await locked(async () => 7, { key: 'k' }), 7)
      stats = locked.stats()
      assert.equal(stats.acquisitions, 1)
      t.diagnostic(JSON.stringify(stats))
    })
  })
}

describe('stats in the rarer set-ups of one Redis', () => {
  // The first attempt at a lock may go as a MULTI transaction, which a user's ACL may refuse
  // (the attempt is then the script), and a SCRIPT FLUSH makes the next script call meet
  // NOSCRIPT (loaded and sent again): neither may lose or double a count.
  for (const [user, flush] of [['default', true], ['nomulti', false], ['nomulti', true]]) {
    test(`exact counts for ${user === 'nomulti' ? 'a user whose ACL refuses MULTI' : 'the default user'}${flush ? ', after SCRIPT FLUSH' : ''}`, async (t) => {
      const admin = new Redis(servers[0].url)
      t.after(() => admin.disconnect())
      await admin.acl('SETUSER', 'nomulti', 'on', '>nomulti-pw', '~*', '&*', '+@all', '-multi', '-exec')
      const url = user === 'nomulti' ? servers[0].url.replace('redis://', 'redis://nomulti:nomulti-pw@') : servers[0].url
      const keyPrefix = `${unique(`rare-${user}-${flush}`)}:`
      const holder = new DistributedLock(url, { keyPrefix })
      // Other settings: an object of its own, counting only its calls.
      const other = new DistributedLock(url, { keyPrefix, commandTimeoutMs: 4_321 })
      const held = await holder.acquire('k', 60_000)
      if (flush) await admin.script('FLUSH')
      assert.equal(await other.tryAcquire('k', 1_000), null)
      await assert.rejects(other.acquire('k', 1_000), { code: 'ELOCKED' })
      await held.release()
      await (await other.acquire('k', 1_000)).release()
      const stats = other.stats()
      assert.deepEqual([stats.acquisitions, stats.contended, stats.errors], [1, 2, { ELOCKED: 1 }], JSON.stringify(stats))
      assert.equal(holder.stats().acquisitions, 1)
      if (user === 'nomulti') {
        // The refusal did happen: the transaction's path was taken and left.
        const multi = /cmdstat_multi:.*rejected_calls=(\d+)/.exec(await admin.info('commandstats'))
        assert.ok(multi && Number(multi[1]) >= 1, 'MULTI refused at least once')
      }
    })
  }
})

describe('woken, on its own', () => {
  test('a waiter woken by a release in another process: woken counted and told, no hand-over', async (t) => {
    const key = unique('woken')
    const children = new Set()
    const client = new Redis(servers[0].url)
    t.after(() => {
      killAll(children)
      client.disconnect()
    })
    const holder = startChild(path.join(__dirname, 'fixtures', 'release-on-signal.js'), { REDIS_URL: servers[0].url, LOCK_KEY: key }, children)
    await holder.ready
    const events = []
    // A poll far beyond the test: only the release's wake-up can end the wait in time.
    const waiters = new DistributedLock(servers[0].url, { retryDelayMs: 30_000, onEvent: (event) => events.push(event) })
    const waiting = waiters.waitForLock(key, 20_000, 10_000)
    // Until the waiter is queued for its wake-up in Redis.
    const queue = Buffer.from(`{lock:${key}}\xffwaiting`, 'latin1')
    for (let i = 0; i < 400 && (await client.zcard(queue)) < 1; i++) await sleep(25)
    assert.equal(await client.zcard(queue), 1, 'the waiter is queued')
    process.kill(holder.proc.pid, 'SIGUSR2')
    assert.equal(await holder.exited, 0, holder.stderr)
    const got = await waiting
    await until(() => events.some((e) => e.type === 'woken'))
    const stats = waiters.stats()
    assert.equal(stats.woken, 1, JSON.stringify(stats))
    assert.equal(stats.handedOver, 0)
    assert.equal(stats.acquisitions, 1)
    assert.deepEqual(events.filter((e) => e.type === 'woken').map((e) => [e.api, e.key]), [['DistributedLock', key]])
    assert.deepEqual(events.filter((e) => e.type === 'handed-over'), [])
    await got.release()
  })
})

// Two objects of different settings on one JS thread share its connection, and so its
// waiters: a release of one hands the lock to the other's waiter in process. Each counts its
// own calls: the waiter's object its acquisition, its wait and the hand-over that ended it;
// the releaser's nothing of the waiter's; nobody a wake-up (the waiter never tried again).
// Answered as Redis confirms the handover, at once on the releaser's lease (lent), or, for a
// waiter kept alive, by its own task (the lock handed over through the runtime).
const handOvers = [
  ['redis', 'confirmed'], ['redis', 'lent'], ['redis', 'autoRefresh'],
  ['memory://', 'confirmed'], ['memory://', 'lent'], ['memory://', 'autoRefresh'],
]
for (const [name, how] of handOvers) {
  describe(`a hand-over between two objects on ${name}, ${how}`, () => {
    test('each object counts its own calls, and each hook hears its own', async () => {
      const url = backends[name]()
      const keyPrefix = `${unique('two')}:`
      const heard = { releaser: [], waiter: [] }
      const hook = (who) => (event) => heard[who].push(event.type)
      const releaser = new DistributedLock(url, { keyPrefix, onEvent: hook('releaser') })
      // A poll far beyond the test: only the release can end the wait in time.
      const lendOnHandover = how === 'lent'
      const waiter = new DistributedLock(url, { keyPrefix, retryDelayMs: 30_000, lendOnHandover, onEvent: hook('waiter') })
      const held = await releaser.acquire('k', 10_000)
      const waiting = waiter.waitForLock('k', 5_000, 10_000, { autoRefresh: how === 'autoRefresh' })
      await sleep(50)
      await held.release()
      const won = await waiting
      assert.equal(won.isHeld, true)
      await won.release()
      // Native news comes in batches from the event loop: until the waiter's release is in.
      await until(() => heard.waiter.includes('released'))
      const zeroWait = { p50: 0, p99: 0, max: 0 }
      const releaserStats = releaser.stats()
      assert.deepEqual({ ...releaserStats, waitMs: zeroWait }, {
        enabled: true, acquisitions: 1, contended: 0, woken: 0, handedOver: 0, refreshes: 0, lost: 0, errors: {},
        waitMs: zeroWait,
      })
      const waiterStats = waiter.stats()
      assert.deepEqual({ ...waiterStats, waitMs: zeroWait }, {
        enabled: true, acquisitions: 1, contended: 1, woken: 0, handedOver: 1, refreshes: 0, lost: 0, errors: {},
        waitMs: zeroWait,
      })
      // Its own histogram: from its call to the hand-over, at least the 50 ms before it.
      assert.ok(waiterStats.waitMs.max >= 45, `waiter waited ${waiterStats.waitMs.max} ms`)
      assert.deepEqual(heard.releaser, ['acquired', 'released'])
      assert.deepEqual(heard.waiter, ['contended', 'handed-over', 'acquired', 'released'])
    })
  })
}

// `stats: false`: nothing counted, the same shape with `enabled: false`; the default counts.
const ZERO = {
  enabled: false, acquisitions: 0, contended: 0, woken: 0, handedOver: 0, refreshes: 0, lost: 0, errors: {},
  waitMs: { p50: 0, p99: 0, max: 0 },
}

describe('stats: false', () => {
  test('DistributedLock: zero after acquisitions, contention, a wait and errors; the hook still hears', async () => {
    const url = servers[0].url
    const keyPrefix = `${unique('off-dl')}:`
    assert.equal(new DistributedLock(url, { keyPrefix }).stats().enabled, true)
    assert.equal(new DistributedLock(url, { keyPrefix, stats: true }).stats().enabled, true)
    const heard = []
    const traced = new DistributedLock(url, { keyPrefix, stats: false, onEvent: (event) => heard.push(event.type) })
    const lock = new DistributedLock(url, { keyPrefix, stats: false })
    const first = await lock.acquire('k', 10_000)
    assert.equal(await lock.tryAcquire('k', 10_000), null)
    await assert.rejects(lock.acquire('k', 10_000), { code: 'ELOCKED' })
    assert.equal(await traced.tryAcquire('k', 10_000), null)
    await first.extend(1_000)
    const waiter = lock.waitForLock('k', 5_000, 10_000)
    await sleep(50)
    await first.release()
    await (await waiter).release()
    assert.deepEqual(lock.stats(), ZERO)
    assert.deepEqual(traced.stats(), ZERO)
    assert.ok(heard.includes('contended'), `heard ${heard}`)
    // A counting lock of the same connection beside it counts its own.
    const counting = new DistributedLock(url, { keyPrefix })
    await (await counting.acquire('k', 10_000)).release()
    assert.equal(counting.stats().acquisitions, 1)
    assert.deepEqual(lock.stats(), ZERO)
    for (const bad of ['false', 0, null, {}]) {
      assert.throws(() => new DistributedLock(url, { stats: bad }), (err) => err.code === 'EINVAL' && err.argument === 'options.stats' && /options\.stats/.test(err.message))
    }
  })

  test('ExclusiveLock: zero after an acquisition and contention; a bad value fails the schema at /stats', async () => {
    const url = servers[0].url
    const name = unique('off-ex')
    const settings = { name, cache_connection: url, lock_ttl_ms: 1000, lock_refresh_ms: 300, stats: false }
    const a = new ExclusiveLock(settings)
    const b = new ExclusiveLock(settings)
    const counting = new ExclusiveLock({ ...settings, stats: undefined })
    assert.equal(counting.stats().enabled, true)
    assert.equal(await a.acquire(), true)
    assert.equal(await b.acquire(), false)
    assert.equal(await counting.acquire(), false)
    await sleep(400)
    assert.deepEqual(a.stats(), ZERO)
    assert.deepEqual(b.stats(), ZERO)
    assert.equal(counting.stats().contended, 1, 'its own native lock: settings differ')
    await a.release()
    for (const bad of ['no', 1, null]) {
      assert.throws(
        () => new ExclusiveLock({ name, cache_connection: url, stats: bad }),
        (err) => err.code === 'EINVAL' && err.errors[0].instancePath === '/stats' && err.errors[0].message === 'must be boolean',
      )
    }
  })

  test('DistributedLockService: zero after a wait that wins', async () => {
    const url = servers[0].url
    const key = unique('off-svc')
    assert.equal(new DistributedLockService(key, 5_000, url).stats().enabled, true)
    const one = new DistributedLockService(key, 5_000, url, { stats: false })
    const two = new DistributedLockService(key, 5_000, url, { stats: false })
    assert.equal(await one.acquire(), true)
    const waiting = two.acquire(5_000, 3_000)
    await sleep(50)
    await one.release()
    assert.equal(await waiting, true)
    await two.release()
    assert.deepEqual(one.stats(), ZERO)
    assert.deepEqual(two.stats(), ZERO)
    for (const bad of ['false', 0]) {
      assert.throws(() => new DistributedLockService(key, 5_000, url, { stats: bad }), (err) => err.code === 'EINVAL' && err.argument === 'options.stats')
    }
  })

  test('syncguard backend and createLock: zero after acquisitions and contention', async () => {
    const url = servers[0].url
    assert.equal(syncguard.createRedisBackend(url, { keyPrefix: unique('off-sg0') }).stats().enabled, true)
    const backend = syncguard.createRedisBackend(url, { keyPrefix: unique('off-sg'), stats: false })
    const won = await backend.acquire({ key: 'k', ttlMs: 5_000 })
    assert.equal(won.ok, true)
    assert.equal((await backend.acquire({ key: 'k', ttlMs: 5_000 })).ok, false)
    await backend.extend({ lockId: won.lockId, ttlMs: 5_000 })
    await backend.release({ lockId: won.lockId })
    assert.deepEqual(backend.stats(), ZERO)
    const locked = syncguard.createLock(url, { keyPrefix: unique('off-sgl'), stats: false })
    assert.equal(await locked(async () => 7, { key: 'k' }), 7)
    assert.deepEqual(locked.stats(), ZERO)
    assert.equal(syncguard.createLock(url, { keyPrefix: unique('off-sgl'), stats: true }).stats().enabled, true)
    for (const bad of ['false', 1]) {
      assert.throws(() => syncguard.createRedisBackend(url, { stats: bad }), (err) => err.code === 'InvalidArgument' && /^stats must be a boolean/.test(err.message))
      assert.throws(() => syncguard.createLock(url, { stats: bad }), (err) => err.code === 'InvalidArgument' && /stats/.test(err.message))
    }
  })
})
