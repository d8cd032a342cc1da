'use strict'

// A slot of a Redis Cluster migrated from one master to another (CLUSTER SETSLOT IMPORTING /
// MIGRATING, MIGRATE, SETSLOT NODE) while its locks are in use: a holder kept by auto-refresh,
// waiters, and a loop of acquire/release guarding a counter. Nothing surfaces an error, the
// counter is exact, fences strictly increase, and the locks live on the new master after. A
// waiter with a long poll is subscribed again on the new master, so a release still wakes it.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { RedisCluster } = require('../helpers/redis-cluster')
const { slot } = require('../helpers/keys')
const { DistributedLock, DistributedLockService, ExclusiveLock } = require('../..')
const syncguard = require('../../syncguard')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let cluster
let counter

before(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 0 })
  counter = new Redis.Cluster(cluster.seeds)
})

after(async () => {
  counter?.disconnect()
  await cluster?.close()
})

test('a slot migrated during use breaks nothing', async () => {
  const tag = '{m}'
  const s = slot(tag)
  const from = await cluster.masterOf(tag)
  const to = (await cluster.masterPorts()).find((port) => port !== from)
  const locks = [new DistributedLock(cluster.url, { retryDelayMs: 5 }), new DistributedLock({ cluster: cluster.seeds }, { retryDelayMs: 5 })]

  let lost
  const held = await locks[0].acquire(`${tag}:held`, 600, { autoRefresh: true, onLost: (err) => { lost = err } })

  const sections = []
  const worker = async (lock, n) => {
    for (let i = 0; i < n; i++) {
      await lock.using(`${tag}:counter-lock`, async (handle) => {
        const value = Number((await counter.get(`${tag}:counter`)) ?? 0)
        await sleep(2)
        await counter.set(`${tag}:counter`, String(value + 1))
        sections.push([value + 1, BigInt(handle.fence)])
      }, { ttlMs: 5000, timeoutMs: 20_000 })
    }
  }
  const ITERATIONS = 15
  // Settled only after the migration: caught now, so a failure is reported, not unhandled.
  const workers = [worker(locks[0], ITERATIONS), worker(locks[1], ITERATIONS), worker(locks[0], ITERATIONS)].map((w) => w.then(() => undefined))
  for (const w of workers) w.catch(() => {})
  await sleep(50)
  await cluster.migrate(s, from, to)
  const ended = await Promise.allSettled(workers)
  for (const end of ended) assert.equal(end.status, 'fulfilled', `a worker failed: ${end.reason?.stack}`)

  assert.equal(Number(await counter.get(`${tag}:counter`)), 3 * ITERATIONS, 'an update was lost')
  sections.sort((a, b) => a[0] - b[0])
  sections.forEach(([value, fence], i) => {
    assert.equal(value, i + 1)
    if (i > 0) assert.ok(fence > sections[i - 1][1], `fence ${fence} after ${sections[i - 1][1]}`)
  })
  await sleep(700) // past the holder's TTL: only refreshes on the new master keep it
  assert.equal(lost, undefined, `the holder was told: ${lost?.message}`)
  assert.equal(await cluster.masterOf(`${tag}:held`), to)
  assert.equal(await cluster.command(to, 'GET', `lock:${tag}:held`), held.token, 'the lock lives on the new master')
  await held.release()
  assert.equal(await locks[1].isLocked(`${tag}:held`), false)
})

/**
 * A waiter polling every 30 s for a lock held on the master of `tag`'s slot, which moves to
 * another master: it waits from the start (`startLate` false), or from when the slot's keys
 * are on the new master but the old one still owns the slot. Once the slot moved, it must
 * be subscribed on the new master, and a release must wake it there: holding within 2 s of
 * the release means a message woke it, which it can only hear on the new master.
 */
async function wokenOnTheNewMaster(tag, { startLate }) {
  const key = `${tag}:wait`
  const from = await cluster.masterOf(tag)
  const to = (await cluster.masterPorts()).find((port) => port !== from)
  const holder = new DistributedLock(cluster.url)
  const waiter = new DistributedLock({ cluster: cluster.seeds }, { retryDelayMs: 30_000 })
  const held = await holder.acquire(key, 60_000)
  const subscribedOn = async (port, when) => {
    const deadline = Date.now() + 8000
    for (;;) {
      const channels = await cluster.command(port, 'PUBSUB', 'SHARDCHANNELS')
      if (channels.some((channel) => channel.includes(key))) return
      assert.ok(Date.now() < deadline, `no sharded subscription to ${key}'s channel on ${port} ${when}`)
      await sleep(20)
    }
  }
  let waiting
  const wait = async () => {
    waiting = waiter.waitForLock(key, 8000, 45_000)
    waiting.catch(() => {}) // awaited below; caught now so an early failure is not unhandled
    await subscribedOn(from, 'before the slot moved')
  }
  if (!startLate) await wait()
  await cluster.migrate(slot(tag), from, to, {
    beforeHandover: startLate
      ? async () => {
        await wait()
        await sleep(150) // its queueing is turned away meanwhile (TRYAGAIN)
      }
      : undefined,
  })
  assert.equal(await cluster.masterOf(key), to)
  await subscribedOn(to, 'after the slot moved')
  const released = Date.now()
  await held.release()
  const won = await waiting
  const waited = Date.now() - released
  assert.ok(waited < 2000, `woken, not polled: ${waited} ms`)
  assert.ok(BigInt(won.fence) > BigInt(held.fence))
  assert.equal(await cluster.command(to, 'GET', `lock:${key}`), won.token, 'held on the new master')
  await won.release()
}

test('a waiter whose slot moved is subscribed again on the new master: a release wakes it, not its poll', async () => {
  await wokenOnTheNewMaster('{w}', { startLate: false })
})

test('a waiter whose slot moves while it is still queueing is subscribed again on the new master', async () => {
  // Its keys already moved, the waiter subscribes on the old master (which serves the slot's
  // shard channels until it hands the slot over), and its queueing is turned away (TRYAGAIN:
  // the queue key is missing where the lock key is) until the handover: the old master drops
  // the subscription while the waiter is still being made wakeable, and a waiter woken by
  // that found the work under way (CI failed so, the queueing slowed by a loaded machine).
  await wokenOnTheNewMaster('{v}', { startLate: true })
})

test('maestro, ExclusiveLock and syncguard (its slot-safe layout) held across a migration of their slot: nothing lost, every call answered', async () => {
  // Key by key (batch 1), so calls meet a lock's keys split between the two masters.
  const tag = '{x}'
  const from = await cluster.masterOf(tag)
  const to = (await cluster.masterPorts()).find((port) => port !== from)
  const quiet = { error() {}, warn() {}, info() {}, debug() {} }
  const lost = []
  const service = new DistributedLockService(`${tag}:service`, 1500, cluster.url, {
    logger: quiet,
    onLost: (_service, err) => lost.push(`maestro ${err.message}`),
  })
  assert.equal(await service.acquire(1500, 200), true)
  // Its key takes no tag (the original's layout): a name whose key is in the slot. MIGRATE
  // gives its lock and owner keys expiries a few ms apart, which its refresh must accept.
  let exclusiveName = 'x'
  for (let n = 0; slot(`exclusive-lock:${exclusiveName}`) !== slot(tag); n++) exclusiveName = `x${n}`
  const exclusive = new ExclusiveLock({ name: exclusiveName, cache_connection: cluster.url, lock_ttl_ms: 1500, lock_refresh_ms: 300 })
  exclusive.on('error', (err) => lost.push(`ExclusiveLock ${err.message}`))
  assert.equal(await exclusive.acquire(), true)
  // syncguard's default prefix: untagged, so its index and fence keys carry a tag of the lock
  // key's slot (README Differences, "Redis Cluster"); all three must move and be found.
  // A call on keys split between the two masters is turned away (TRYAGAIN) and sent again
  // until the slot's last key has moved: one key at a time on a loaded machine can take
  // past 2 s (a release by id failed so, once in 12 runs under load).
  const backend = syncguard.createRedisBackend(cluster.url, { commandTimeoutMs: 5000 })
  const sgKey = `${tag}:sg`
  const held = await backend.acquire({ key: sgKey, ttlMs: 60_000 })
  assert.equal(held.ok, true, JSON.stringify(held))
  assert.equal(await cluster.masterOf(`syncguard:${sgKey}`), from)
  // Extended by lockId every round, and one released by lockId half-way through.
  const extended = await backend.acquire({ key: `${tag}:sg-extended`, ttlMs: 60_000 })
  const released = await backend.acquire({ key: `${tag}:sg-released`, ttlMs: 60_000 })
  assert.equal(extended.ok && released.ok, true)

  // Asked again and again while the slots move: each answer "held", never an error.
  let moving = true
  let rounds = 0
  let releasedAt = null
  const answers = { ok: 0, wrong: [], failed: [] }
  const asking = (async () => {
    while (moving) {
      rounds++
      const releaseNow = releasedAt === null && rounds === 3
      if (releaseNow) releasedAt = rounds
      for (const [what, call, right] of [
        ['extend by id', () => backend.extend({ lockId: extended.lockId, ttlMs: 60_000 }), (v) => v.ok === true],
        ...(releaseNow ? [['release by id', () => backend.release({ lockId: released.lockId }), (v) => v.ok === true]] : []),
        ['owns', () => syncguard.owns(backend, held.lockId), (v) => v === true],
        ['lookup by key', () => backend.lookup({ key: sgKey }), (v) => v?.fence === held.fence],
        ['lookup by id', () => backend.lookup({ lockId: held.lockId }), (v) => v?.fence === held.fence],
        ['isLocked', () => backend.isLocked({ key: sgKey }), (v) => v === true],
      ]) {
        try {
          const value = await call()
          if (right(value)) answers.ok++
          else answers.wrong.push(`${what}: ${JSON.stringify(value)}`)
        } catch (err) {
          answers.failed.push(`${what}: ${err.code} ${err.message}`)
        }
      }
      await sleep(5)
    }
  })()
  await cluster.migrate(slot(tag), from, to, { batch: 1, pauseMs: 30 })
  moving = false
  await asking
  assert.deepEqual(answers.wrong, [], 'a call answered the lock not held while it moved')
  assert.deepEqual(answers.failed, [], 'a call failed while the slot moved')
  assert.ok(answers.ok > 0)
  assert.ok(releasedAt !== null, `the migration took fewer than 3 rounds (${rounds}): nothing was released during it`)
  assert.equal(await backend.isLocked({ key: `${tag}:sg-released` }), false, 'the release by lockId during the migration took')
  assert.equal((await backend.release({ lockId: extended.lockId })).ok, true)

  await sleep(2000) // past the TTLs (1.5 s): only refreshes on the new master keep them
  assert.deepEqual(lost, [], 'a holder was told its lock was lost')
  assert.equal(service.isLocked, true)
  assert.equal(exclusive.acquired, true)
  for (const key of [`${tag}:service`, `syncguard:${sgKey}`, `exclusive-lock:${exclusiveName}`]) {
    assert.equal(await cluster.masterOf(key), to)
    assert.equal(await cluster.command(to, 'EXISTS', key), 1, `${key} lives on the new master`)
  }
  assert.equal(await syncguard.owns(backend, held.lockId), true)
  assert.equal((await backend.extend({ lockId: held.lockId, ttlMs: 60_000 })).ok, true)
  assert.equal((await backend.release({ lockId: held.lockId })).ok, true)
  assert.equal(await backend.isLocked({ key: sgKey }), false)
  assert.equal(await service.release(), true)
  assert.equal(await cluster.command(to, 'EXISTS', `${tag}:service`), 0)
  await exclusive.release()
  assert.equal(await cluster.command(to, 'EXISTS', `exclusive-lock:${exclusiveName}`), 0)
})

test('an ExclusiveLock migrated before its first refresh keeps its lock: on Cluster its first attempt writes the owner key', async () => {
  // On Cluster every attempt goes through the runtime as the script (the JS thread's socket
  // steps aside), which writes the owner key at once: the refresh then proves the lock by it,
  // with the slack MIGRATE's re-timed expiries need, never by the lock key's exact expiry.
  let name = 'e'
  for (let n = 0; slot(`exclusive-lock:${name}`) === slot('{m}') || slot(`exclusive-lock:${name}`) === slot('{x}'); n++) name = `e${n}`
  const key = `exclusive-lock:${name}`
  const from = await cluster.masterOf(key)
  const to = (await cluster.masterPorts()).find((port) => port !== from)
  const lost = []
  // The first refresh 1.5 s after the acquisition: the migration is over well before it.
  const exclusive = new ExclusiveLock({ name, cache_connection: cluster.url, lock_ttl_ms: 4000, lock_refresh_ms: 1500 })
  exclusive.on('error', (err) => lost.push(err.message))
  assert.equal(await exclusive.acquire(), true)
  const refreshedBefore = await cluster.command(from, 'PTTL', key)
  await cluster.migrate(slot(key), from, to, { batch: 1, pauseMs: 0 })
  assert.equal(await cluster.masterOf(key), to)
  assert.ok(Number(await cluster.command(to, 'PTTL', key)) <= Number(refreshedBefore), 'not refreshed before it moved')
  await sleep(4500) // past the TTL: only the refreshes on the new master keep it
  assert.deepEqual(lost, [], 'the holder was told its lock was lost')
  assert.equal(exclusive.acquired, true)
  assert.equal(await cluster.command(to, 'EXISTS', key), 1)
  await exclusive.release()
  assert.equal(await cluster.command(to, 'EXISTS', key), 0)
})
