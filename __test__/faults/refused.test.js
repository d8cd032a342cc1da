'use strict'

// A server that refuses connections (Redis killed, not restarted): waits and retrying
// acquisitions in flight, and new ones, reject with ECONNECTION within 100 ms (refusals that
// persist 40 ms put the server down: an attempt then fails, and every wait of the connection
// tries at once), never "someone else holds it" nor at their bound. A quick restart (the port
// refused ~20 ms) fails none of them: they carry on once it accepts. syncguard's lookup and
// owns always ask Redis: while it is down they reject, and after it came back empty they say
// the lock is gone, never what a cache remembered.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../helpers/redis-server')
const { startProxy } = require('../helpers/tcp-proxy')
const Redis = require('ioredis')
const { DistributedLock } = require('../..')
const sg = require('../../syncguard')

const WAIT_BOUND_MS = 8000
// The bound; measured a few ms (see the report printed by each case).
const FAIL_FAST_MS = 100

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
    const settled = await Promise.all(inFlight.map((pending) => outcome(pending, killedAt)))
    t.diagnostic(`in flight rejected ${settled.map((o) => o.ms.toFixed(1)).join(', ')} ms after Redis exited`)
    for (const [i, o] of settled.entries()) {
      assert.equal(o.code, 'ECONNECTION', `in flight #${i}`)
      assert.ok(o.ms < FAIL_FAST_MS, `in flight #${i} rejected after ${o.ms.toFixed(0)} ms`)
    }
    const fresh = []
    for (const start of [
      () => waiter.waitForLock('refused:b', WAIT_BOUND_MS, 1000),
      () => retrier.acquire('refused:b', 1000),
      () => waiter.tryAcquire('refused:b', 1000),
    ]) {
      const startedAt = performance.now()
      fresh.push(await outcome(start(), startedAt))
    }
    t.diagnostic(`new ones rejected after ${fresh.map((o) => o.ms.toFixed(1)).join(', ')} ms`)
    for (const [i, o] of fresh.entries()) {
      assert.equal(o.code, 'ECONNECTION', `new #${i}`)
      assert.ok(o.ms < FAIL_FAST_MS, `new #${i} rejected after ${o.ms.toFixed(0)} ms`)
    }
  } finally {
    await server.close()
  }
})

test('a quick restart (port refused 20 ms) fails no wait nor acquisition: they carry on once it accepts', async (t) => {
  const server = await startRedis()
  const proxy = await startProxy(server.port)
  const raw = new Redis(server.port, '127.0.0.1')
  try {
    const holder = new DistributedLock(server.url)
    const waiter = new DistributedLock(proxy.url)
    const held = await holder.acquire('quick:a', 30_000)
    const waits = [
      waiter.waitForLock('quick:a', WAIT_BOUND_MS, 1000),
      waiter.waitForLock('quick:a', WAIT_BOUND_MS, 1000, { autoRefresh: true }),
    ]
    await new Promise((resolve) => setTimeout(resolve, 100))
    const closedAt = performance.now()
    const reopened = proxy.refuse(20)
    // Sent while the port refuses: they meet the refusal and must ride it out.
    const during = [waiter.acquire('quick:b', 1000), waiter.tryAcquire('quick:c', 1000)].map((pending) =>
      outcome(pending, closedAt),
    )
    await reopened
    const settled = await Promise.all(during)
    t.diagnostic(`acquisitions sent while refused settled after ${settled.map((o) => o.ms.toFixed(1)).join(', ')} ms`)
    for (const [i, o] of settled.entries()) assert.equal(o.code, 'resolved', `sent while refused #${i}`)
    // Waits still in flight: each wins the lock in turn once it is released.
    await held.release()
    for (const [i, pending] of waits.entries()) {
      const won = await pending
      assert.ok(won !== null, `wait #${i} resolved null`)
      assert.equal(await raw.get('lock:quick:a'), won.token, `wait #${i}: Redis names it the holder`)
      await won.release()
    }
  } finally {
    raw.disconnect()
    await proxy.close()
    await server.close()
  }
})

test('syncguard: lookup and owns ask Redis: they reject while it is down, and answer gone after an empty restart', async () => {
  const server = await startRedis()
  try {
    const store = sg.createRedisBackend(server.url)
    const won = await store.acquire({ key: 'refused:sg', ttlMs: 30_000 })
    assert.equal(won.ok, true)
    assert.equal(await sg.owns(store, won.lockId), true)
    await server.kill()
    await assert.rejects(store.lookup({ key: 'refused:sg' }))
    await assert.rejects(sg.owns(store, won.lockId))
    await server.start()
    assert.equal(await store.lookup({ key: 'refused:sg' }), null)
    assert.equal(await sg.owns(store, won.lockId), false)
  } finally {
    await server.close()
  }
})
