'use strict'

// Issue 26: an attempt bounded by its caller's own short deadline that gets no reply in time
// says nothing about the connection (Redis may be busy for a few ms). It must not tear the
// shared connection down under every lock held through it: no `suspended`, `isHeld` stays
// true, and the attempt itself still settles by its own bound.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('./helpers/redis-server')
const { adminOf, ourConnections, withDirect } = require('./helpers/direct')
const { DistributedLock, LockAcquisitionError, LockError } = require('..')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server
let admin

before(async () => {
  server = await startRedis()
  admin = await adminOf(server)
})

after(async () => {
  try {
    server?.resume() // a SIGSTOPped server would only die by the helper's SIGKILL fallback
  } catch {}
  admin?.disconnect()
  await server?.close()
})

/** Stops Redis answering for `ms` (SIGSTOP), as a fork or a slow command would. */
async function stall(ms) {
  server.pause()
  try {
    await sleep(ms)
  } finally {
    server.resume()
  }
}

test('waitForLock attempts that time out by their own short bound leave a held lock of the same connection alone', async () => {
  const events = []
  const lock = new DistributedLock(server.url, { onEvent: (event) => events.push(event.type) })
  const other = new DistributedLock(server.url)
  const suspensions = []
  const held = await lock.acquire('short-bounds:A', 600, {
    autoRefresh: true,
    onSuspended: (handle) => suspensions.push(handle.key),
    onLost: (err) => suspensions.push(`lost ${err.code}`),
  })
  const taken = await other.acquire('short-bounds:B', 30_000)

  const late = []
  let timedOut = 0
  for (let round = 0; round < 12; round++) {
    const attempts = []
    for (let i = 0; i < 6; i++) {
      const timeoutMs = 2 + ((round + i) % 4)
      const started = performance.now()
      attempts.push(
        lock.waitForLock('short-bounds:B', timeoutMs, 5000).then(
          () => assert.fail('B is held by another holder'),
          (err) => {
            const ms = performance.now() - started
            assert.ok(err instanceof LockError, `got ${err?.name}: ${err?.message}`)
            if (!(err instanceof LockAcquisitionError)) timedOut++
            // The attempt's bound is its deadline plus a 25 ms grace; the rest is this busy box.
            if (ms > timeoutMs + 25 + 250) late.push(`${timeoutMs} ms wait settled after ${ms.toFixed(0)} ms`)
          },
        ),
      )
      if (i === 2) await sleep(1)
    }
    await Promise.all([stall(40 + (round % 3) * 10), ...attempts])
    assert.equal(held.isHeld, true, `A not held after round ${round}`)
    await sleep(30)
  }

  assert.ok(timedOut > 0, 'no attempt timed out by its own bound: the stalls tested nothing')
  assert.deepEqual(late, [])
  // Long enough for a refresh that would confirm a doubt to have answered.
  await sleep(300)
  assert.deepEqual(suspensions, [])
  assert.ok(!events.includes('suspended'), `events: ${events.join(', ')}`)
  assert.equal(held.isHeld, true)
  assert.equal(held.suspended, false)
  await held.release()
  assert.equal(held.isHeld, false)
  assert.equal(await lock.isLocked('short-bounds:A'), false)
  await taken.release()
})

test('neither the JS-thread connection nor the runtime\'s is replaced for attempts cut short by their own deadline', async () => {
  const lock = new DistributedLock(server.url)
  const other = new DistributedLock(server.url)
  const taken = await other.acquire('short-bounds:C', 30_000)
  await withDirect(lock, admin)
  const before = await ourConnections(admin)
  assert.equal(before.socket.length, 1, `connections: ${JSON.stringify(before)}`)
  assert.equal(before.tokio.length, 1, `connections: ${JSON.stringify(before)}`)

  let timedOut = 0
  for (let round = 0; round < 6; round++) {
    const attempts = [2, 3, 4, 5].map((timeoutMs) =>
      lock.waitForLock('short-bounds:C', timeoutMs, 5000).then(
        () => assert.fail('C is held by another holder'),
        (err) => {
          assert.ok(err instanceof LockError, `got ${err?.name}: ${err?.message}`)
          if (err.code === 'ETIMEDOUT') timedOut++
        },
      ),
    )
    await Promise.all([stall(50), ...attempts])
    // Calls after the stall, on whichever connections are open now.
    assert.equal(await lock.isLocked('short-bounds:C'), true)
  }
  assert.ok(timedOut > 0, 'no attempt timed out by its own bound: the stalls tested nothing')
  assert.deepEqual(await ourConnections(admin), before)
  await taken.release()
})
