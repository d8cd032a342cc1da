'use strict'

// restartQuarantineMs on every API (README "Guarantees"): off by default; set, no lock is
// given on a server incarnation first met less than that ago (a fresh server here), on the
// JS thread's socket as on the runtime's connection; validated before any Redis call, named
// as each API names it; taken on a Redlock and a Cluster; ignored by memory://.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('./helpers/redis-server')
const { DistributedLock } = require('..')
const ExclusiveLock = require('../exclusive-lock')
const DistributedLockService = require('../maestro')
const sg = require('../syncguard')
const { createCluster } = require('redis')

const Q = 1000
// Redis's TIME and our clock, read a few ms apart.
const CLOCKS_MS = 50

let server
before(async () => {
  server = await startRedis()
})
after(async () => {
  await server?.close()
})

const since = (started) => performance.now() - started

test('a fresh server gives no lock within restartQuarantineMs on any API; without it, at once', async () => {
  const started = performance.now()
  const key = (api) => `rq:${api}`
  const waits = await Promise.all([
    (async () => {
      const lock = new DistributedLock(server.url, { restartQuarantineMs: Q })
      const handle = await lock.acquire(key('distributed'), 10_000)
      const took = since(started)
      // Known open now: the next goes at once (on the runtime's connection: with the option
      // on, first attempts never take the JS thread's socket).
      const again = performance.now()
      const next = await lock.acquire(key('distributed:again'), 10_000)
      assert.ok(since(again) < Q / 2, `a second lock waited ${since(again)} ms`)
      await Promise.all([handle.release(), next.release()])
      return ['DistributedLock', took]
    })(),
    (async () => {
      const lock = new ExclusiveLock({ name: key('exclusive'), cache_connection: server.url, restart_quarantine_ms: Q })
      assert.equal(await lock.acquire(), true)
      const took = since(started)
      await lock.release()
      return ['ExclusiveLock', took]
    })(),
    (async () => {
      const service = new DistributedLockService(key('maestro'), 10_000, server.url, { restartQuarantineMs: Q })
      assert.equal(await service.acquire(), true)
      const took = since(started)
      await service.release()
      return ['DistributedLockService', took]
    })(),
    (async () => {
      const backend = sg.createRedisBackend(server.url, { restartQuarantineMs: Q })
      const won = await backend.acquire({ key: key('syncguard'), ttlMs: 10_000 })
      assert.equal(won.ok, true)
      const took = since(started)
      await backend.release({ lockId: won.lockId })
      return ['syncguard', took]
    })(),
  ])
  for (const [api, took] of waits) {
    assert.ok(took >= Q - CLOCKS_MS, `${api} acquired ${took.toFixed(1)} ms after a fresh server was first met`)
  }
  // Off by default: a connection without it asks nothing and waits for nothing.
  const plain = new DistributedLock(server.url)
  const fresh = performance.now()
  const handle = await plain.acquire('rq:plain', 10_000)
  assert.ok(since(fresh) < Q / 2)
  await handle.release()
})

test("maestro's maxWaitTime bounds its wait at a closed gate: false when the gate opens after it, true when before", async () => {
  const fresh = await startRedis()
  try {
    const service = new DistributedLockService('rq:maestro:short', 10_000, fresh.url, { restartQuarantineMs: Q })
    const started = performance.now()
    assert.equal(await service.acquire(undefined, 100), false)
    // 100 ms, 25 ms of grace and a hop; far from the gate's 1,000 ms.
    assert.ok(since(started) < Q / 2, `acquire(ttl, 100) answered after ${since(started).toFixed(1)} ms`)
    assert.equal(await service.acquire(undefined, 5_000), true)
    assert.ok(since(started) >= Q - CLOCKS_MS, `won ${since(started).toFixed(1)} ms after the server was first met`)
    await service.release()
  } finally {
    await fresh.close()
  }
})

test('a lock that waited at the gate comes with its TTL, and an AbortSignal ends the wait', async () => {
  const own = await startRedis()
  try {
    const lock = new DistributedLock(own.url, { restartQuarantineMs: 1500 })
    const started = performance.now()
    const handle = await lock.acquire('rq:short', 1000)
    assert.ok(since(started) >= 1500 - CLOCKS_MS, `acquired after ${since(started)} ms`)
    // Stamped before the wait, it came expired.
    assert.equal(handle.isHeld, true)
    await handle.release()
    // Met about 1.5 s ago: 3.5 s of a 5 s quarantine left.
    const fresh = new DistributedLock(own.url, { restartQuarantineMs: 5000 })
    const controller = new AbortController()
    setTimeout(() => controller.abort(new Error('given up')), 200)
    const waited = performance.now()
    await assert.rejects(fresh.acquire('rq:aborted', 10_000, { signal: controller.signal }), /given up/)
    assert.ok(since(waited) < 2500, `the gate held an aborted acquire ${since(waited)} ms`)
    assert.equal(await new DistributedLock(own.url).isLocked('rq:aborted'), false)
  } finally {
    await own.close()
  }
})

test('after a restart, no first attempt goes out before the gate opens (the JS thread\'s socket included)', async () => {
  const lock = new DistributedLock(server.url, { restartQuarantineMs: Q })
  // The gate learned (it may still be closing from the test before) and the socket in use.
  for (let i = 0; i < 3; i++) await (await lock.acquire(`rq:socket:${i}`, 10_000)).release()
  await server.restart()
  const restarted = performance.now()
  // Calls that may take the socket (its break sends one to the runtime, which learns of the
  // drop; the next opens the socket again on the new server).
  for (let i = 0; i < 5; i++) await lock.isLocked('rq:socket:probe')
  const handle = await lock.acquire('rq:socket:after', 10_000)
  const took = since(restarted)
  assert.ok(took >= Q - CLOCKS_MS, `a lock ${took.toFixed(1)} ms after the restart`)
  await handle.release()
})

test('restartQuarantineMs must be a whole number of ms from 0, named as each API names it, before any call', () => {
  for (const bad of ['1000', null, -1, 1.5, NaN, Infinity, 2 ** 31]) {
    const range = typeof bad === 'number'
    const named = (name) => (err) => {
      assert.equal(err.code, 'EINVAL', String(bad))
      assert.ok(err instanceof (range ? RangeError : TypeError), `${bad}: ${err.constructor.name}`)
      assert.equal(err.argument, name)
      assert.match(err.message, new RegExp(name.replace('.', '\\.')))
      return true
    }
    assert.throws(() => new DistributedLock(server.url, { restartQuarantineMs: bad }), named('options.restartQuarantineMs'))
    assert.throws(() => new DistributedLockService('k', 1000, server.url, { restartQuarantineMs: bad }), named('options.restartQuarantineMs'))
    // ExclusiveLock's types are the original's schema errors (NaN and Infinity are no JSON
    // numbers there); its range ours.
    assert.throws(
      () => new ExclusiveLock({ name: 'k', cache_connection: server.url, restart_quarantine_ms: bad }),
      Number.isFinite(bad)
        ? named('restart_quarantine_ms')
        : (err) => err.code === 'EINVAL' && err.errors?.[0]?.instancePath === '/restart_quarantine_ms',
    )
    assert.throws(
      () => sg.createRedisBackend(server.url, { restartQuarantineMs: bad }),
      (err) => err.code === 'InvalidArgument' && /restartQuarantineMs/.test(err.message),
    )
  }
  assert.ok(new DistributedLock(server.url, { restartQuarantineMs: 0 }))
})

test('taken on a Redlock (a gate per node) and a Cluster (a gate per master) on every API', () => {
  const nodes = ['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3']
  const cluster = 'redis+cluster://127.0.0.1:1,127.0.0.1:2'
  // faults/redlock-restart-quarantine.test.js and faults/cluster-restart-quarantine.test.js
  // have them at work.
  for (const redis of [nodes, cluster]) {
    assert.ok(new DistributedLock(redis, { restartQuarantineMs: 1000 }))
    assert.ok(new ExclusiveLock({ name: 'k', cache_connection: redis, restart_quarantine_ms: 1000 }))
    assert.ok(sg.createRedisBackend(redis, { restartQuarantineMs: 1000 }))
    assert.ok(new DistributedLockService('k', 1000, redis, { restartQuarantineMs: 1000 }))
  }
})

test('refused, not ignored, where the calls do not go through a connection of ours; 0 accepted there', () => {
  // syncguard over an eval-only client (a node-redis cluster client takes this way too).
  const evalOnly = { eval: async () => { throw new Error('no call expected') } }
  for (const client of [evalOnly, createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] })]) {
    assert.throws(
      () => sg.createRedisBackend(client, { restartQuarantineMs: 1000 }),
      (err) => err.code === 'InvalidArgument' && /^restartQuarantineMs is not supported/.test(err.message),
    )
    assert.ok(sg.createRedisBackend(client, { restartQuarantineMs: 0 }))
  }
  // maestro's service over a maestro cache (driven through the cache's own methods).
  let calls = 0
  const count = async () => { calls++ }
  const cache = { setIfNotExists: count, get: count, del: count, expire: count }
  assert.throws(
    () => new DistributedLockService('k', 1000, cache, { restartQuarantineMs: 1000 }),
    (err) => err.code === 'EINVAL' && err.argument === 'options.restartQuarantineMs' && /maestro cache/.test(err.message),
  )
  assert.ok(new DistributedLockService('k', 1000, cache, { restartQuarantineMs: 0 }))
  assert.equal(calls, 0)
})

test('memory:// ignores it: nothing there restarts', async () => {
  const lock = DistributedLock.memory('restart-quarantine', { restartQuarantineMs: 60_000 })
  const started = performance.now()
  const handle = await lock.acquire('rq:memory', 1000)
  assert.ok(since(started) < 1000)
  await handle.release()
})
