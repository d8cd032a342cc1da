'use strict'

// `new DistributedLock(redis, { fair: true })`: waiters get each lock in the order they asked
// for it, whichever connection they wait on, and no attempt gets ahead of them. Two locks
// with different connection settings stand for two processes (each gets its own connection).
// Runs on a private redis-server, or on the embedded memory:// backend with NRL_BACKEND=memory
// (`npm test` runs both; see helpers/backend.js).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startBackend } = require('./helpers/backend')
const { DistributedLock } = require('..')
const { siblingKey } = require('./helpers/keys')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let backend
let admin

before(async () => {
  backend = await startBackend()
  admin = backend.client()
  await admin.connect()
})

after(async () => {
  admin?.disconnect()
  await backend?.close()
  assert.deepEqual(unhandled, [])
})

/** A fair lock on a connection of its own (`n` tells the connections apart). */
function processLock(n, options = {}) {
  return new DistributedLock(backend.url, { fair: true, connectTimeoutMs: 4000 + n, ...options })
}

test('waiters get a fair lock in the order they asked, even behind a waiter of another connection', async () => {
  const [here, there] = [processLock(1), processLock(2)]
  const holder = await here.acquire('fair:order', 30_000)
  const order = []
  const waiting = []
  // Waiters on the holder's own connection among the others: its release must not hand the
  // lock to them out of turn, as an unfair lock does.
  for (const [lock, name] of [[there, 't1'], [here, 'h1'], [there, 't2'], [here, 'h2']]) {
    waiting.push(
      lock.waitForLock('fair:order', 10_000, 30_000).then(async (handle) => {
        order.push(name)
        await sleep(5)
        await handle.release()
      }),
    )
    await sleep(50)
  }
  const released = performance.now()
  await holder.release()
  await Promise.all(waiting)
  assert.deepEqual(order, ['t1', 'h1', 't2', 'h2'])
  assert.ok(performance.now() - released < 1000, 'the turns came from polls, not releases')
  assert.equal(await admin.zcard(siblingKey('lock:fair:order', 'line')), 0)
})

test('tryAcquire does not get ahead of a waiter, even when the lock is free', async () => {
  const [holderLock, waiterLock, other] = [processLock(3), processLock(4), processLock(5)]
  const holder = await holderLock.acquire('fair:try', 30_000)
  let won = null
  const waiting = waiterLock.waitForLock('fair:try', 10_000, 30_000).then((handle) => (won = handle))
  await sleep(100)
  await holder.release()
  assert.equal(await other.tryAcquire('fair:try', 30_000), null)
  await waiting
  assert.ok(won.isHeld)
  await won.release()
  // With nobody in line it is an ordinary lock.
  const mine = await other.tryAcquire('fair:try', 30_000)
  assert.ok(mine)
  await mine.release()
})

test('acquire with retries takes its place in line with its first attempt', async () => {
  const holderLock = processLock(6)
  const patient = processLock(7, { maxRetries: 3, retryDelayMs: 3000 })
  const eager = processLock(8, { retryDelayMs: 10 })
  const holder = await holderLock.acquire('fair:retries', 30_000)
  const order = []
  const first = patient.acquire('fair:retries', 30_000).then(async (handle) => {
    order.push('patient')
    await handle.release()
  })
  await sleep(100)
  const second = eager.waitForLock('fair:retries', 10_000, 30_000).then(async (handle) => {
    order.push('eager')
    await handle.release()
  })
  await sleep(100)
  const released = performance.now()
  await holder.release()
  await Promise.all([first, second])
  assert.deepEqual(order, ['patient', 'eager'])
  assert.ok(performance.now() - released < 1000, 'the retry, not the release')
})

test('options.fair must be a boolean', () => {
  for (const fair of ['yes', 1, null, {}]) {
    assert.throws(
      () => new DistributedLock(backend.url, { fair }),
      (err) => err instanceof TypeError && err.argument === 'options.fair',
      `fair ${String(fair)}`,
    )
  }
})
