'use strict'

// A release that hands the lock to a waiter of its own JS thread lends that waiter its lease:
// the waiter is answered as the handover is sent, and Redis is told by the handover itself
// (src/binding/direct/handoff.rs). What must hold: the waiter's fence is the one kept for it,
// below any later holder's; a handover Redis does not confirm leaves the waiter's handle not
// holding, and its token is never freed under it; a lease too short to outlast the
// handover's bound is not lent.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { DistributedLock } = require('..')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let server
let admin

before(async () => {
  server = await startRedis()
  admin = new Redis(server.port)
})

after(async () => {
  admin?.disconnect()
  await server?.close()
  assert.deepEqual(unhandled, [])
})

/** Makes calls until the JS-thread connection is open (it opens after the first call). */
async function warm(lock) {
  for (let i = 0; i < 20; i++) {
    await lock.isLocked('lend:warm-up')
    await sleep(5)
  }
}

/** Whether `promise` settled before any I/O could: only microtasks ran meanwhile. */
async function settledAtOnce(promise) {
  let settled = false
  promise.then(
    () => (settled = true),
    () => (settled = true),
  )
  for (let i = 0; i < 5; i++) await null
  return settled
}

/** A holder, and a waiter of the same instance queued behind it. */
async function holderAndWaiter(lock, key, ttlMs) {
  const holder = await lock.acquire(key, ttlMs)
  const waiting = lock.waitForLock(key, 10_000, 10_000)
  await sleep(50) // the waiter is queued, and has made its attempt
  return { holder, waiting }
}

test('the waiter starts as the handover is sent, with the fence kept for it', async () => {
  const lock = new DistributedLock(server.url)
  await warm(lock)
  const { holder, waiting } = await holderAndWaiter(lock, 'lend:plain', 10_000)
  const released = holder.release()
  assert.equal(await settledAtOnce(waiting), true, 'the waiter was answered only after Redis')
  const handle = await waiting
  assert.equal(handle.isHeld, true)
  assert.equal(BigInt(handle.fence), BigInt(holder.fence) + 1n)
  await released
  assert.equal(holder.isHeld, false)
  assert.equal(handle.isHeld, true)
  assert.equal(await admin.get('lock:lend:plain'), handle.token)
  assert.equal(BigInt(await admin.get('{lock:lend:plain}:fence')), BigInt(handle.fence) + 1n)
  await handle.release()
  assert.equal(await admin.exists('lock:lend:plain'), 0)
})

test('a handover Redis refuses (the lock was taken behind the holder) leaves the waiter holding nothing', async () => {
  const lock = new DistributedLock(server.url)
  const other = new DistributedLock(server.url)
  await warm(lock)
  const { holder, waiting } = await holderAndWaiter(lock, 'lend:taken', 10_000)
  // Deleted behind the holder's back, and taken by another instance.
  await admin.del('lock:lend:taken')
  const thief = await other.acquire('lend:taken', 10_000)
  const released = holder.release()
  assert.equal(await settledAtOnce(waiting), true)
  const handle = await waiting
  await released
  assert.equal(handle.isHeld, false, 'Redis did not confirm the handover')
  // Its fence was kept for it before the theft: the thief's is higher, so a fenced store
  // refuses the waiter's writes once the thief wrote.
  assert.ok(BigInt(handle.fence) < BigInt(thief.fence), `${handle.fence} vs ${thief.fence}`)
  assert.equal(await admin.get('lock:lend:taken'), thief.token)
  await handle.release() // a no-op for a non-holder
  assert.equal(await admin.get('lock:lend:taken'), thief.token)
  await thief.release()
})

test('a handover with no reply within its bound leaves the waiter holding nothing, and its token in place', async () => {
  const lock = new DistributedLock(server.url, { commandTimeoutMs: 300 })
  await warm(lock)
  const { holder, waiting } = await holderAndWaiter(lock, 'lend:silent', 10_000)
  server.pause()
  let handle
  try {
    const released = holder.release().catch((err) => err)
    assert.equal(await settledAtOnce(waiting), true)
    handle = await waiting
    assert.equal(handle.isHeld, true)
    const outcome = await released
    assert.equal(outcome?.code, 'ETIMEDOUT', `release: ${outcome}`)
    assert.equal(handle.isHeld, false, 'unconfirmed within the bound')
  } finally {
    server.resume()
  }
  // The handover ran late: the waiter may still be in its section, so its token stays.
  await sleep(100)
  assert.equal(await admin.get('lock:lend:silent'), handle.token)
  await handle.release()
  assert.equal(await admin.exists('lock:lend:silent'), 0)
})

test('a handover refused on the JS-thread connection (NOSCRIPT) goes again through tokio and confirms the waiter', async () => {
  const lock = new DistributedLock(server.url)
  await warm(lock)
  const { holder, waiting } = await holderAndWaiter(lock, 'lend:refused', 10_000)
  await admin.script('FLUSH')
  const released = holder.release()
  assert.equal(await settledAtOnce(waiting), true)
  const handle = await waiting
  await released
  assert.equal(handle.isHeld, true)
  assert.equal(await admin.get('lock:lend:refused'), handle.token)
  assert.equal(BigInt(handle.fence), BigInt(holder.fence) + 1n)
  await handle.release()
  assert.equal(await admin.exists('lock:lend:refused'), 0)
})

test('a lease that may run out within the handover bound is not lent: the waiter waits for Redis', async () => {
  const lock = new DistributedLock(server.url, { commandTimeoutMs: 5000 })
  await warm(lock)
  const { holder, waiting } = await holderAndWaiter(lock, 'lend:short', 3000)
  const released = holder.release()
  assert.equal(await settledAtOnce(waiting), false)
  const handle = await waiting
  await released
  assert.equal(handle.isHeld, true)
  assert.equal(await admin.get('lock:lend:short'), handle.token)
  assert.ok(BigInt(handle.fence) > BigInt(holder.fence))
  await handle.release()
})
