'use strict'

// syncguard on a Redis Cluster (3 masters) started here on loopback, nodes stopped by pid.
// With a prefix holding no hash tag (the default 'syncguard'), syncguard's own keys of one
// lock would span three slots: the lock key stays its own, and the index and fence keys go
// in its slot behind a tag of that slot, the lockId naming it (README "Differences"). Every
// backend method and lock() work so on keys of every master; a tagged prefix keeps
// syncguard's exact layout, key for key.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { RedisCluster } = require('./helpers/redis-cluster')
const { keySlot } = require('../lib/cli/key-slot')
const { createStandinBackend } = require('./helpers/syncguard-standin')
const syncguard = require('../syncguard')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let cluster
let masters = []
const clients = []

before(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 0 })
  masters = await cluster.masterPorts()
})

after(async () => {
  for (const client of clients) client.disconnect()
  await cluster?.close()
})

/** The keys on the master at `port` matching `pattern` (SCAN, there only). */
async function keysOn(port, pattern) {
  const found = []
  let cursor = '0'
  do {
    const [next, keys] = await cluster.command(port, 'SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = next
    found.push(...keys)
  } while (cursor !== '0')
  return found
}

/** The one key on `port` named `<before>{<tag>}<name>`, checked to be in `lockKey`'s slot. */
async function inSlotOf(port, lockKey, name, before = '') {
  const found = (await keysOn(port, `*${name}`)).filter((key) => key.endsWith(`}${name}`))
  assert.equal(found.length, 1, `one ${name} on ${port}: ${found}`)
  const [key] = found
  assert.ok(new RegExp(`^${before}\\{[0-9a-z]{1,4}\\}`).test(key), key)
  assert.equal(Number(await cluster.command(port, 'CLUSTER', 'KEYSLOT', key)), keySlot(lockKey), `${key} beside ${lockKey}`)
  return key
}

test('the default prefix: acquire, isLocked, lookup by key and by id, extend, release on keys of every master', async () => {
  const backend = syncguard.createRedisBackend(cluster.url)
  for (const port of masters) {
    const key = await cluster.keyOn(port, 'resource-', 'syncguard:')
    const lockKey = `syncguard:${key}`
    const result = await backend.acquire({ key, ttlMs: 5000 })
    assert.equal(result.ok, true, JSON.stringify(result))
    // A lockId of syncguard's shape: 16 bytes in base64url.
    assert.match(result.lockId, /^[A-Za-z0-9_-]{22}$/)
    assert.equal(Buffer.from(result.lockId, 'base64url').toString('base64url'), result.lockId)
    const record = JSON.parse(await cluster.command(port, 'GET', lockKey))
    assert.equal(record.lockId, result.lockId, `the record is on ${port}, at the lock key syncguard names`)
    assert.equal(record.fence, result.fence)
    const index = await inSlotOf(port, lockKey, `syncguard:id:${result.lockId}`)
    assert.equal(await cluster.command(port, 'GET', index), lockKey)
    const fence = await inSlotOf(port, lockKey, `syncguard:fence:${lockKey}`)
    assert.equal(await cluster.command(port, 'GET', fence), String(Number(result.fence)))

    assert.equal(await backend.isLocked({ key }), true)
    const other = await backend.acquire({ key, ttlMs: 5000 })
    assert.deepEqual([other.ok, other.reason], [false, 'locked'])
    const byKey = await backend.lookup({ key })
    const byId = await backend.lookup({ lockId: result.lockId })
    for (const info of [byKey, byId]) {
      assert.equal(info.fence, result.fence)
      assert.equal(info.expiresAtMs, result.expiresAtMs)
    }
    const extended = await backend.extend({ lockId: result.lockId, ttlMs: 20_000 })
    assert.equal(extended.ok, true)
    assert.ok(extended.expiresAtMs > result.expiresAtMs)
    assert.ok(Number(await cluster.command(port, 'PTTL', index)) > 10_000, 'the index key extended with the lock')
    assert.ok(Number(await cluster.command(port, 'PTTL', lockKey)) > 10_000)

    assert.deepEqual(await backend.release({ lockId: result.lockId }), { ok: true })
    assert.equal(await backend.isLocked({ key }), false)
    assert.equal(await backend.lookup({ key }), null)
    assert.equal(await backend.lookup({ lockId: result.lockId }), null)
    assert.equal(await cluster.command(port, 'EXISTS', lockKey, index), 0, 'lock and index deleted')
    assert.equal((await backend.release({ lockId: result.lockId })).ok, false)
    assert.equal((await backend.extend({ lockId: result.lockId, ttlMs: 1000 })).ok, false)

    // The next holder's fence is above, from the same counter.
    const next = await backend.acquire({ key, ttlMs: 5000 })
    assert.ok(next.fence > result.fence, `${next.fence} after ${result.fence}`)
    await next.release()
  }
  // A lockId this package did not make names some slot, whose index does not hold it.
  const stranger = 'q3Zx_-09aZbYc8Lm2kP4Tw'
  assert.equal(await backend.lookup({ lockId: stranger }), null)
  assert.equal((await backend.release({ lockId: stranger })).ok, false)
  assert.equal((await backend.extend({ lockId: stranger, ttlMs: 1000 })).ok, false)
})

test('isLocked with clean-up deletes an expired record and its index key, in the lock key\'s slot', async () => {
  const backend = syncguard.createRedisBackend(cluster.url, { cleanupInIsLocked: true })
  for (const port of masters) {
    const key = await cluster.keyOn(port, 'stale-', 'syncguard:')
    const lockKey = `syncguard:${key}`
    const result = await backend.acquire({ key, ttlMs: 60_000 })
    assert.equal(result.ok, true)
    const index = await inSlotOf(port, lockKey, `syncguard:id:${result.lockId}`)
    // The record as a holder whose clock ran out 10 s ago left it (beyond the 2 s guard).
    const record = JSON.parse(await cluster.command(port, 'GET', lockKey))
    record.expiresAtMs -= 70_000
    await cluster.command(port, 'SET', lockKey, JSON.stringify(record), 'KEEPTTL')
    assert.equal(await backend.isLocked({ key }), false)
    assert.equal(await cluster.command(port, 'EXISTS', lockKey), 0, 'the record deleted')
    assert.equal(await cluster.command(port, 'EXISTS', index), 0, 'its index key deleted')
    assert.ok(Number(await cluster.command(port, 'EXISTS', await inSlotOf(port, lockKey, `syncguard:fence:${lockKey}`))), 'the fence counter kept')
  }
})

test('lock(fn) by 4 concurrent callers on one key of each master: exact counters, increasing fences', async () => {
  const io = new Redis.Cluster(cluster.seeds)
  clients.push(io)
  // Four backends on two connections (a URL, an ioredis Cluster), and createLock.
  const backends = [
    syncguard.createRedisBackend(cluster.url),
    syncguard.createRedisBackend(cluster.url),
    syncguard.createRedisBackend(io),
    syncguard.createRedisBackend(io),
  ]
  const ROUNDS = 8
  for (const port of masters) {
    const key = await cluster.keyOn(port, 'count-', 'syncguard:')
    const counter = `counter:{syncguard:${key}}`
    const sections = []
    const caller = async (backend, i) => {
      const locked = i === 0 ? syncguard.createLock(cluster.url) : (fn, config) => syncguard.lock(backend, fn, config)
      for (let round = 0; round < ROUNDS; round++) {
        await locked(async () => {
          const value = Number((await io.get(counter)) ?? 0)
          await sleep(Math.floor(Math.random() * 3))
          await io.set(counter, String(value + 1))
          const held = await backend.lookup({ key })
          sections.push([value + 1, held.fence])
        }, { key, ttlMs: 5000, acquisition: { timeoutMs: 20_000, retryDelayMs: 5 } })
      }
    }
    await Promise.all(backends.map(caller))
    assert.equal(Number(await io.get(counter)), backends.length * ROUNDS, `an update of ${key} was lost`)
    sections.sort((a, b) => a[0] - b[0])
    sections.forEach(([value, fence], i) => {
      assert.equal(value, i + 1)
      if (i > 0) assert.ok(fence > sections[i - 1][1], `${key}: fence ${fence} after ${sections[i - 1][1]}`)
    })
    assert.equal(await syncguard.createRedisBackend(cluster.url).isLocked({ key }), false)
  }
})

test('an ioredis client\'s keyPrefix stays in front of every key, the tag after it', async () => {
  const io = new Redis.Cluster(cluster.seeds, { keyPrefix: 'app:' })
  clients.push(io)
  const backend = syncguard.createRedisBackend(io)
  for (const port of masters) {
    const key = await cluster.keyOn(port, 'prefixed-', 'app:syncguard:')
    const lockKey = `app:syncguard:${key}`
    const result = await backend.acquire({ key, ttlMs: 5000 })
    assert.equal(result.ok, true)
    assert.equal(JSON.parse(await cluster.command(port, 'GET', lockKey)).lockId, result.lockId)
    const index = await inSlotOf(port, lockKey, `syncguard:id:${result.lockId}`, 'app:')
    assert.equal(await cluster.command(port, 'GET', index), lockKey)
    assert.equal((await backend.lookup({ lockId: result.lockId })).fence, result.fence)
    assert.equal((await backend.extend({ lockId: result.lockId, ttlMs: 5000 })).ok, true)
    assert.deepEqual(await backend.release({ lockId: result.lockId }), { ok: true })
    assert.equal(await cluster.command(port, 'EXISTS', lockKey, index), 0)
  }
})

test('a prefix with a hash tag keeps syncguard\'s exact layout: its key names, its lockIds', async () => {
  for (const port of masters) {
    const tag = await cluster.keyOn(port, 'sg')
    const prefix = `{${tag}}`
    const backend = syncguard.createRedisBackend(cluster.url, { keyPrefix: prefix })
    const ids = []
    for (let i = 0; i < 4; i++) {
      const result = await backend.acquire({ key: `job${i}`, ttlMs: 5000 })
      assert.equal(result.ok, true)
      ids.push(result.lockId)
      assert.equal(JSON.parse(await cluster.command(port, 'GET', `${prefix}:job${i}`)).lockId, result.lockId)
      assert.equal(await cluster.command(port, 'GET', `${prefix}:id:${result.lockId}`), `${prefix}:job${i}`)
      assert.equal(await cluster.command(port, 'GET', `${prefix}:fence:${prefix}:job${i}`), String(Number(result.fence)))
      assert.deepEqual(await backend.release({ lockId: result.lockId }), { ok: true })
    }
    // Not slot-named: four fresh lockIds are random through their last characters too.
    assert.equal(new Set(ids.map((id) => id.slice(19))).size > 1, true, ids.join(' '))
  }
})

test('syncguard\'s stand-in on the cluster: with a tagged prefix it and ours exclude each other; untagged, its acquire fails CROSSSLOT', async () => {
  const io = new Redis.Cluster(cluster.seeds)
  clients.push(io)
  for (const port of masters) {
    const prefix = `{${await cluster.keyOn(port, 'fleet')}}`
    const theirs = createStandinBackend(io, { keyPrefix: prefix })
    const ours = syncguard.createRedisBackend(cluster.url, { keyPrefix: prefix })
    const held = await theirs.acquire({ key: 'job', ttlMs: 5000 })
    assert.equal(held.ok, true)
    assert.equal((await ours.acquire({ key: 'job', ttlMs: 5000 })).reason, 'locked')
    assert.equal(await ours.isLocked({ key: 'job' }), true)
    assert.equal((await ours.lookup({ lockId: held.lockId })).fence, held.fence)
    assert.equal((await theirs.release({ lockId: held.lockId })).ok, true)
    const mine = await ours.acquire({ key: 'job', ttlMs: 5000 })
    assert.ok(mine.fence > held.fence, `${mine.fence} after ${held.fence}`)
    assert.equal((await theirs.acquire({ key: 'job', ttlMs: 5000 })).ok, false)
    assert.equal((await theirs.lookup({ lockId: mine.lockId })).fence, mine.fence)
    assert.deepEqual(await ours.release({ lockId: mine.lockId }), { ok: true })
  }
  // The layout syncguard would use under the default prefix spans three slots.
  await assert.rejects(createStandinBackend(io).acquire({ key: 'job', ttlMs: 5000 }), /CROSSSLOT/)
})
