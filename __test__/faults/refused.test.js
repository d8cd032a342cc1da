'use strict'

// A server that refuses connections (Redis killed, not restarted): waits and retrying
// acquisitions in flight, and new ones, reject with ECONNECTION within 100 ms (refusals that
// persist 40 ms put the server down: an attempt then fails, and every wait of the connection
// tries at once), never "someone else holds it" nor at their bound. A quick restart (the port
// refused ~20 ms) fails none of them: they carry on once it accepts. syncguard's lookup, owns
// and isLocked always ask Redis: while it is down they reject, and after it came back empty
// they say the lock is gone, never what a cache remembered. maestro's acquire resolves false, and
// syncguard's lock() rejects ServiceUnavailable, long before their 8 s wait.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../helpers/redis-server')
const { startProxy } = require('../helpers/tcp-proxy')
const { lateness } = require('../helpers/lateness')
const Redis = require('ioredis')
const { DistributedLock, DistributedLockService } = require('../..')
const sg = require('../../syncguard')

const WAIT_BOUND_MS = 8000
// The bound; measured a few ms (see the report printed by each case), 45-80 ms in
// flight (40 ms of them PERSIST). Each bound below gets what load took on top (`lateness`).
const FAIL_FAST_MS = 100
// maestro's and syncguard's own paths on top of the same failure (measured 45-60 ms in
// flight): a generous bound, still far below their 8 s wait.
const WRAPPED_FAIL_FAST_MS = 1000
// New acquisitions kept alive (autoRefresh, maestro) load the refresh scripts first, a load
// that fails as the attempt would (measured 0.2-8 ms; about 330 ms when it retried the
// refusal as a refresh does): a generous bound.
const KEPT_FAIL_FAST_MS = 200
// Refusals that persist this long put the server down (src/core/basics/drops.rs PERSIST): a
// "quick restart" must refuse for less, which a loaded machine's late timers can spoil.
const PERSIST_MS = 40
// Quick restarts tried before giving up on making one that short.
const QUICK_ROUNDS = 5

/** How a promise settled, and after how many ms from `since`. */
async function outcome(promise, since) {
  try {
    await promise
    return { code: 'resolved', ms: performance.now() - since }
  } catch (err) {
    return { code: err.code, ms: performance.now() - since }
  }
}

test('a refused server: waits and acquisitions in flight, and new ones, reject with ECONNECTION within 100 ms', async (t) => {
  const server = await startRedis()
  try {
    const holder = new DistributedLock(server.url)
    const waiter = new DistributedLock(server.url)
    // Retries every 200 ms for 10 s: in a pause between two attempts when Redis goes.
    const retrier = new DistributedLock(server.url, { maxRetries: 50, retryDelayMs: 200 })
    const held = await holder.acquire('refused:a', 30_000)
    assert.equal(held.isHeld, true)
    const inFlight = [
      waiter.waitForLock('refused:a', WAIT_BOUND_MS, 1000),
      waiter.waitForLock('refused:a', WAIT_BOUND_MS, 1000, { autoRefresh: true }),
      retrier.acquire('refused:a', 1000),
    ]
    // Into their waits: the first attempts found the key held.
    await new Promise((resolve) => setTimeout(resolve, 100))
    // The moment Redis refuses: kill() resolves once the process has exited.
    await server.kill()
    const killedAt = performance.now()
    const stop = lateness()
    const settled = await Promise.all(inFlight.map((pending) => outcome(pending, killedAt)))
    const late = stop()
    t.diagnostic(
      `in flight rejected ${settled.map((o) => o.ms.toFixed(1)).join(', ')} ms after Redis exited (timers ${late.toFixed(1)} ms late)`,
    )
    for (const [i, o] of settled.entries()) {
      assert.equal(o.code, 'ECONNECTION', `in flight #${i}`)
      assert.ok(o.ms < FAIL_FAST_MS + late, `in flight #${i} rejected after ${o.ms.toFixed(0)} ms (${late.toFixed(0)} late)`)
    }
    const fresh = []
    for (const start of [
      () => waiter.waitForLock('refused:b', WAIT_BOUND_MS, 1000),
      () => retrier.acquire('refused:b', 1000),
      () => waiter.tryAcquire('refused:b', 1000),
    ]) {
      const startedAt = performance.now()
      const stop = lateness()
      fresh.push({ ...(await outcome(start(), startedAt)), late: stop() })
    }
    t.diagnostic(`new ones rejected after ${fresh.map((o) => o.ms.toFixed(1)).join(', ')} ms`)
    for (const [i, o] of fresh.entries()) {
      assert.equal(o.code, 'ECONNECTION', `new #${i}`)
      assert.ok(o.ms < FAIL_FAST_MS + o.late, `new #${i} rejected after ${o.ms.toFixed(0)} ms (${o.late.toFixed(0)} late)`)
    }
    // New ones kept alive load the refresh scripts first: the load fails as fast.
    const kept = []
    for (const start of [
      () => waiter.waitForLock('refused:c', WAIT_BOUND_MS, 1000, { autoRefresh: true }),
      () => retrier.acquire('refused:c', 1000, { autoRefresh: true }),
    ]) {
      const startedAt = performance.now()
      const stop = lateness()
      kept.push({ ...(await outcome(start(), startedAt)), late: stop() })
    }
    t.diagnostic(`new autoRefresh ones rejected after ${kept.map((o) => o.ms.toFixed(1)).join(', ')} ms`)
    for (const [i, o] of kept.entries()) {
      assert.equal(o.code, 'ECONNECTION', `new autoRefresh #${i}`)
      assert.ok(
        o.ms < KEPT_FAIL_FAST_MS + o.late,
        `new autoRefresh #${i} rejected after ${o.ms.toFixed(0)} ms (${o.late.toFixed(0)} late)`,
      )
    }
  } finally {
    await server.close()
  }
})

/**
 * Waits and acquisitions in flight through `proxy` while it refuses for 20 ms: how the
 * acquisitions sent while it refused settled, the waits (each settling to `{ i, won }` or
 * `{ i, err }`, never rejecting), the holder's handle, and how long the port really refused.
 */
async function quickRestart(server, proxy, name) {
  const holder = new DistributedLock(server.url)
  const waiter = new DistributedLock(proxy.url)
  const held = await holder.acquire(`${name}:a`, 30_000)
  const waits = [
    waiter.waitForLock(`${name}:a`, WAIT_BOUND_MS, 1000),
    waiter.waitForLock(`${name}:a`, WAIT_BOUND_MS, 1000, { autoRefresh: true }),
  ].map((pending, i) =>
    pending.then(
      (won) => ({ i, won }),
      (err) => ({ i, err }),
    ),
  )
  await new Promise((resolve) => setTimeout(resolve, 100))
  const closedAt = performance.now()
  const reopened = proxy.refuse(20)
  // Sent while the port refuses: they meet the refusal and must ride it out.
  const during = [waiter.acquire(`${name}:b`, 1000), waiter.tryAcquire(`${name}:c`, 1000)].map((pending) =>
    outcome(pending, closedAt),
  )
  const refusedMs = await reopened
  return { held, waits, refusedMs, settled: await Promise.all(during) }
}

/** Calls `each` with each of `waits` (see quickRestart) in the order they settle. */
async function inTurn(waits, each) {
  const left = new Map(waits.map((pending, i) => [i, pending]))
  while (left.size > 0) {
    const settled = await Promise.race(left.values())
    left.delete(settled.i)
    await each(settled)
  }
}

test('a quick restart (port refused 20 ms) fails no wait nor acquisition: they carry on once it accepts', async (t) => {
  const server = await startRedis()
  const proxy = await startProxy(server.port)
  const raw = new Redis(server.port, '127.0.0.1')
  try {
    for (let round = 1; ; round++) {
      const name = `quick${round}`
      const run = await quickRestart(server, proxy, name)
      if (run.refusedMs >= PERSIST_MS) {
        // Load kept the port closed as long as a server that is down: no quick restart, and
        // failing then is right. Clean up and make another.
        t.diagnostic(`round ${round}: the port refused ${run.refusedMs.toFixed(1)} ms; again`)
        await run.held.release()
        await inTurn(run.waits, ({ won }) => won?.release())
        assert.ok(round < QUICK_ROUNDS, `no refusal shorter than ${PERSIST_MS} ms in ${round} rounds`)
        continue
      }
      t.diagnostic(
        `round ${round}: refused ${run.refusedMs.toFixed(1)} ms; acquisitions sent meanwhile settled after ${run.settled.map((o) => o.ms.toFixed(1)).join(', ')} ms`,
      )
      for (const [i, o] of run.settled.entries()) assert.equal(o.code, 'resolved', `sent while refused #${i}`)
      // Waits still in flight: each wins the lock in turn once it is released, in whichever
      // order (waiters of one connection are not fair ones, and the drop lined them up anew).
      await run.held.release()
      await inTurn(run.waits, async ({ i, won, err }) => {
        assert.equal(err, undefined, `wait #${i} rejected: ${err?.code} ${err?.message}`)
        assert.ok(won !== null, `wait #${i} resolved null`)
        assert.equal(await raw.get(`lock:${name}:a`), won.token, `wait #${i}: Redis names it the holder`)
        await won.release()
      })
      return
    }
  } finally {
    raw.disconnect()
    await proxy.close()
    await server.close()
  }
})

test("maestro: acquire(ttl, 8000) in flight and new resolve false long before the wait while Redis refuses", async (t) => {
  const server = await startRedis()
  try {
    const logger = { error() {}, warn() {}, info() {}, debug() {} }
    const holder = new DistributedLockService('refused-maestro', 30_000, server.url, { logger })
    assert.equal(await holder.acquire(30_000, 0), true)
    const waiting = new DistributedLockService('refused-maestro', 1000, server.url, { logger })
    const inFlight = waiting.acquire(1000, WAIT_BOUND_MS)
    // Into its wait: its first attempt found the key held.
    await new Promise((resolve) => setTimeout(resolve, 100))
    await server.kill()
    const killedAt = performance.now()
    const first = await inFlight
    const inFlightMs = performance.now() - killedAt
    assert.equal(first, false)
    assert.equal(waiting.isLocked, false)
    // Again on the same service, and on a service made now: the refresh scripts are loaded
    // first, and the load fails as fast as DistributedLock's new autoRefresh ones above.
    const fresh = new DistributedLockService('refused-maestro-b', 1000, server.url, { logger })
    const again = []
    for (const service of [waiting, fresh]) {
      const startedAt = performance.now()
      const won = await service.acquire(1000, WAIT_BOUND_MS)
      again.push({ won, ms: performance.now() - startedAt, held: service.isLocked })
    }
    t.diagnostic(`in flight resolved false after ${inFlightMs.toFixed(1)} ms; new ${again.map((o) => o.ms.toFixed(1)).join(', ')} ms`)
    assert.ok(inFlightMs < WRAPPED_FAIL_FAST_MS, `in flight resolved after ${inFlightMs.toFixed(0)} ms`)
    for (const [i, o] of again.entries()) {
      assert.equal(o.won, false, `new #${i}`)
      assert.equal(o.held, false, `new #${i}`)
      assert.ok(o.ms < KEPT_FAIL_FAST_MS, `new #${i} resolved after ${o.ms.toFixed(0)} ms`)
    }
  } finally {
    await server.close()
  }
})

test('syncguard: lock() in flight and new reject ServiceUnavailable long before the wait while Redis refuses', async (t) => {
  const server = await startRedis()
  try {
    const store = sg.createRedisBackend(server.url)
    const won = await store.acquire({ key: 'refused:sg-lock', ttlMs: 30_000 })
    assert.equal(won.ok, true)
    const acquisition = { timeoutMs: WAIT_BOUND_MS, maxRetries: 1000, retryDelayMs: 200 }
    let ran = 0
    const inFlight = sg.lock(store, () => ran++, { key: 'refused:sg-lock', acquisition })
    await new Promise((resolve) => setTimeout(resolve, 100))
    await server.kill()
    const killedAt = performance.now()
    const first = await outcome(inFlight, killedAt)
    const startedAt = performance.now()
    const second = await outcome(sg.lock(store, () => ran++, { key: 'refused:sg-lock-b', acquisition }), startedAt)
    t.diagnostic(`in flight rejected ${first.code} after ${first.ms.toFixed(1)} ms; new ${second.code} after ${second.ms.toFixed(1)} ms`)
    for (const [name, o] of [['in flight', first], ['new', second]]) {
      assert.equal(o.code, 'ServiceUnavailable', name)
      assert.ok(o.ms < WRAPPED_FAIL_FAST_MS, `${name} rejected after ${o.ms.toFixed(0)} ms`)
    }
    assert.equal(ran, 0, 'fn ran without the lock')
  } finally {
    await server.close()
  }
})

test('syncguard: lookup, owns and isLocked ask Redis: they reject while it is down, and answer gone after an empty restart', async () => {
  const server = await startRedis()
  try {
    const store = sg.createRedisBackend(server.url)
    const won = await store.acquire({ key: 'refused:sg', ttlMs: 30_000 })
    assert.equal(won.ok, true)
    assert.equal(await sg.owns(store, won.lockId), true)
    await server.kill()
    await assert.rejects(store.lookup({ key: 'refused:sg' }), { code: 'ServiceUnavailable' })
    await assert.rejects(sg.owns(store, won.lockId), { code: 'ServiceUnavailable' })
    await assert.rejects(store.isLocked({ key: 'refused:sg' }), { code: 'ServiceUnavailable' })
    await server.start()
    assert.equal(await store.lookup({ key: 'refused:sg' }), null)
    assert.equal(await sg.owns(store, won.lockId), false)
    assert.equal(await store.isLocked({ key: 'refused:sg' }), false)
  } finally {
    await server.close()
  }
})
