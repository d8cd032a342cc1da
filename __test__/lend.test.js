'use strict'

// With `lendOnHandover`, a release that hands the lock to a waiter of its own JS thread lends
// that waiter its lease:
// the waiter is answered as the handover is sent, and Redis is told by the handover itself
// (src/core/ops/fast/handoff.rs). What must hold: the waiter's fence is the one kept for it,
// below any later holder's; a handover Redis does not confirm leaves the waiter's handle not
// holding, and its token is never freed under it; a lease too short to outlast the
// handover's bound is not lent.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { withDirect } = require('./helpers/direct')
const { DistributedLock } = require('..')
const { fenceKey } = require('./helpers/keys')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// Lending is an opt-in of the waiter's instance; off by default (see the last tests).
const LEND = { lendOnHandover: true }
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let server
let admin

before(async () => {
  server = await startRedis()
  admin = new Redis(server.port, { lazyConnect: true })
  await admin.connect()
  await admin.client('SETNAME', 'test-admin')
})

after(async () => {
  admin?.disconnect()
  await server?.close()
  assert.deepEqual(unhandled, [])
})

/** Spins the JS thread for `ms`: nothing else of this process runs meanwhile. */
function blockFor(ms) {
  const end = performance.now() + ms
  while (performance.now() < end);
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

/** A holder, and a waiter (of `waiters`, by default the same instance) queued behind it. */
async function holderAndWaiter(lock, key, ttlMs, waiters = lock) {
  const holder = await lock.acquire(key, ttlMs)
  const waiting = waiters.waitForLock(key, 10_000, 10_000)
  await sleep(50) // the waiter is queued, and has made its attempt
  return { holder, waiting }
}

test('the waiter starts as the handover is sent, with the fence kept for it', async () => {
  const lock = new DistributedLock(server.url, LEND)
  await withDirect(lock, admin)
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
  // The counter is past the waiter's fence (its own failed attempt, a transaction, drew two
  // more): no later holder can be given a fence at or below it.
  assert.ok(BigInt(await admin.get(fenceKey('lock:lend:plain'))) > BigInt(handle.fence))
  await handle.release()
  assert.equal(await admin.exists('lock:lend:plain'), 0)
})

test('a lent start reports the lender\'s expiry until Redis confirms it, then its own', async () => {
  const lock = new DistributedLock(server.url, LEND)
  await withDirect(lock, admin)
  // The lender's lease outlasts the handover's bound (else nothing is lent), and is far
  // shorter than the waiter's 30 s.
  const holder = await lock.acquire('lend:expiry', 6000)
  const waiting = lock.waitForLock('lend:expiry', 10_000, 30_000)
  await sleep(50) // the waiter is queued, and has made its attempt
  const lenders = holder.info.expiresAt
  const released = holder.release()
  assert.equal(await settledAtOnce(waiting), true)
  const handle = await waiting
  // Before any reply could be read: the handle stands on the lender's lease alone.
  const lent = handle.info.expiresAt
  assert.ok(lent <= lenders, `lent start expires at ${lent}, after its lender's lease (${lenders})`)
  await released
  const own = handle.info.expiresAt
  // Confirmed: its own 30 s, counted from a request sent before now.
  assert.ok(own > lenders + 20_000, `confirmed start expires at ${own}, lender at ${lenders}`)
  assert.ok(own <= Date.now() + 30_000, `confirmed start expires at ${own}, past its TTL`)
  assert.equal(handle.isHeld, true)
  await handle.release()
})

for (const where of ['the same instance', 'another instance on the same URL']) {
  test(`a handover Redis refuses (the lock was taken behind the holder) leaves the waiter holding nothing: waiter of ${where}`, async () => {
    const lock = new DistributedLock(server.url, LEND)
    const other = new DistributedLock(server.url)
    const waiters = where === 'the same instance' ? lock : new DistributedLock(server.url, LEND)
    await withDirect(lock, admin)
    const { holder, waiting } = await holderAndWaiter(lock, 'lend:taken', 10_000, waiters)
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
}

test('a holder whose own lent start is unconfirmed does not lend on: the next waiter waits for the lock', async () => {
  const lock = new DistributedLock(server.url, LEND)
  const other = new DistributedLock(server.url)
  await withDirect(lock, admin)
  const holder = await lock.acquire('lend:chain', 10_000)
  const first = lock.waitForLock('lend:chain', 10_000, 10_000)
  const second = lock.waitForLock('lend:chain', 10_000, 10_000)
  await sleep(50)
  await admin.del('lock:lend:chain')
  const thief = await other.acquire('lend:chain', 10_000)
  const released = holder.release()
  assert.equal(await settledAtOnce(first), true)
  const handle = await first
  // Released at once, its own handover still in flight: it must not lend its fence on.
  const releasedAgain = handle.release()
  assert.equal(await settledAtOnce(second), false, 'lent on from an unconfirmed start')
  await released
  await releasedAgain
  assert.equal(handle.isHeld, false)
  await sleep(100)
  assert.equal(await admin.get('lock:lend:chain'), thief.token)
  await thief.release()
  const next = await second
  assert.ok(BigInt(next.fence) > BigInt(thief.fence), `${next.fence} vs ${thief.fence}`)
  assert.equal(await admin.get('lock:lend:chain'), next.token)
  await next.release()
})

test('a lent start counts on the lender\'s deadline until Redis answers, even with the event loop blocked', async () => {
  const lock = new DistributedLock(server.url, { ...LEND, commandTimeoutMs: 300 })
  await withDirect(lock, admin)
  const { holder, waiting } = await holderAndWaiter(lock, 'lend:capped', 1500)
  server.pause()
  try {
    const released = holder.release().catch((err) => err)
    assert.equal(await settledAtOnce(waiting), true)
    const handle = await waiting
    assert.equal(handle.isHeld, true)
    // Past the lender's lease, before any timer of ours could run: not held any more.
    blockFor(1600)
    assert.equal(handle.isHeld, false, 'held past the lease it stands on')
    await released
  } finally {
    server.resume()
  }
})

test('an extend right after a lent start goes after the handover', async () => {
  const lock = new DistributedLock(server.url, LEND)
  await withDirect(lock, admin)
  const { holder, waiting } = await holderAndWaiter(lock, 'lend:extended', 10_000)
  const released = holder.release()
  const handle = await waiting
  await handle.extend(50_000)
  await released
  assert.equal(await admin.get('lock:lend:extended'), handle.token)
  assert.ok((await admin.pttl('lock:lend:extended')) > 30_000)
  assert.equal(handle.isHeld, true)
  await handle.release()
  assert.equal(await admin.exists('lock:lend:extended'), 0)
})

test('a lock the watchdog reported lost is not lent on', async () => {
  const lock = new DistributedLock(server.url, { ...LEND, commandTimeoutMs: 500 })
  const other = new DistributedLock(server.url)
  await withDirect(lock, admin)
  const holder = await lock.acquire('lend:lost', 3000, { autoRefresh: true, onLost: () => {} })
  const waiting = lock.waitForLock('lend:lost', 10_000, 10_000)
  await sleep(50)
  await admin.del('lock:lend:lost')
  const thief = await other.acquire('lend:lost', 10_000)
  const lost = await holder.lost // at its next refresh, within a third of its TTL
  assert.equal(lost.code, 'ELOST')
  const released = holder.release()
  assert.equal(await settledAtOnce(waiting), false, 'a lost lock lent its fence on')
  await released
  await thief.release()
  const handle = await waiting
  assert.ok(BigInt(handle.fence) > BigInt(thief.fence))
  assert.equal(await admin.get('lock:lend:lost'), handle.token)
  await handle.release()
})

test('a handover with no reply within its bound leaves the waiter holding nothing, and its token in place', async () => {
  const lock = new DistributedLock(server.url, { ...LEND, commandTimeoutMs: 300 })
  await withDirect(lock, admin)
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
  let holderNow
  for (let tries = 0; tries < 100 && holderNow !== handle.token; tries++) {
    await sleep(20)
    holderNow = await admin.get('lock:lend:silent')
  }
  assert.equal(holderNow, handle.token)
  await handle.release()
  assert.equal(await admin.exists('lock:lend:silent'), 0)
})

test('a handover refused on the JS-thread connection (NOSCRIPT) goes again through tokio and confirms the waiter', async () => {
  const lock = new DistributedLock(server.url, LEND)
  await withDirect(lock, admin)
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
  const lock = new DistributedLock(server.url, { ...LEND, commandTimeoutMs: 5000 })
  await withDirect(lock, admin)
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

test('without lendOnHandover (the default), each waiter resolves only once Redis names its token, with the TTL it asked for', async () => {
  const lock = new DistributedLock(server.url)
  await withDirect(lock, admin)
  const key = 'lend:off'
  let holder = await lock.acquire(key, 10_000)
  for (let round = 0; round < 20; round++) {
    const ttlMs = 3000 + round * 100
    const waiting = lock.waitForLock(key, 10_000, ttlMs)
    await sleep(5)
    const released = holder.release()
    const asked = performance.now()
    const handle = await waiting
    // Read at once, before anything else of ours runs: the handover must already be in Redis.
    const [[, token], [, pttl]] = await admin.multi().get(`lock:${key}`).pttl(`lock:${key}`).exec()
    const elapsed = performance.now() - asked
    assert.equal(token, handle.token, `round ${round}: Redis still names the previous holder`)
    assert.ok(pttl <= ttlMs && pttl >= ttlMs - elapsed - 5, `round ${round}: PTTL ${pttl}, asked for ${ttlMs}`)
    await released
    holder = handle
  }
  await holder.release()
})

test('a waiter that did not opt in waits for Redis even when the releasing instance did', async () => {
  const lender = new DistributedLock(server.url, LEND)
  const waiter = new DistributedLock(server.url)
  await withDirect(lender, admin)
  const { holder, waiting } = await holderAndWaiter(lender, 'lend:not-mine', 10_000, waiter)
  const released = holder.release()
  assert.equal(await settledAtOnce(waiting), false, 'the waiter was answered before Redis')
  const handle = await waiting
  assert.equal(await admin.get('lock:lend:not-mine'), handle.token)
  await released
  await handle.release()
})
