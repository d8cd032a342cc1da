'use strict'

// A server that refuses connections (Redis killed, not restarted): a wait in flight and a new
// one reject with ECONNECTION well before their bound (the connection's brief retry across a
// restart, about 0.3 s, then the error), never "someone else holds it". syncguard's lookup and
// owns always ask Redis: while it is down they reject, and after it came back empty they say
// the lock is gone, never what a cache remembered.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../helpers/redis-server')
const { DistributedLock } = require('../..')
const sg = require('../../syncguard')

const WAIT_BOUND_MS = 8000
// 10x the expected (the connection retries refusals for about 0.3 s).
const FAIL_FAST_MS = 3000

/** How a promise settled, and after how many ms from `since`. */
async function outcome(promise, since) {
  try {
    await promise
    return { code: 'resolved', ms: performance.now() - since }
  } catch (err) {
    return { code: err.code, ms: performance.now() - since }
  }
}

test('a refused server: waits in flight and new ones reject with ECONNECTION long before their bound', async () => {
  const server = await startRedis()
  try {
    const holder = new DistributedLock(server.url)
    const waiter = new DistributedLock(server.url)
    const held = await holder.acquire('refused:a', 30_000)
    assert.equal(held.isHeld, true)
    const inFlight = waiter.waitForLock('refused:a', WAIT_BOUND_MS, 1000)
    // Into its wait: the first attempt found the key held.
    await new Promise((resolve) => setTimeout(resolve, 100))
    const killedAt = performance.now()
    await server.kill()
    const first = await outcome(inFlight, killedAt)
    assert.equal(first.code, 'ECONNECTION')
    assert.ok(first.ms < FAIL_FAST_MS, `the wait in flight rejected after ${first.ms.toFixed(0)} ms`)
    const startedAt = performance.now()
    const fresh = await outcome(waiter.waitForLock('refused:b', WAIT_BOUND_MS, 1000), startedAt)
    assert.equal(fresh.code, 'ECONNECTION')
    assert.ok(fresh.ms < FAIL_FAST_MS, `a new wait rejected after ${fresh.ms.toFixed(0)} ms`)
  } finally {
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
