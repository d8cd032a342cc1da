'use strict'

// The behaviour every backend owes, through the public APIs only: on a private redis-server,
// or on the embedded memory:// backend with NRL_BACKEND=memory (`npm test` runs both; see
// helpers/backend.js).
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const { BACKEND, startBackend } = require('./helpers/backend')
const { DistributedLock, ExclusiveLock } = require('..')
const DistributedLockService = require('../maestro')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

describe(`backend: ${BACKEND}`, () => {
  let backend
  before(async () => {
    backend = await startBackend()
  })
  after(async () => {
    await backend?.close()
    assert.deepEqual(unhandled, [])
  })

  test('acquire, tryAcquire, isLocked and release', async () => {
    const lock = new DistributedLock(backend.url)
    const handle = await lock.acquire('basic', 5000)
    assert.equal(handle.isHeld, true)
    assert.equal(await lock.isLocked('basic'), true)
    assert.equal(await lock.tryAcquire('basic', 5000), null)
    await handle.release()
    assert.equal(await lock.isLocked('basic'), false)
    const again = await lock.tryAcquire('basic', 5000)
    assert.notEqual(again, null)
    await again.release()
  })

  test('a lock expires with its TTL', async () => {
    const lock = new DistributedLock(backend.url)
    const handle = await lock.acquire('expiry', 100)
    await sleep(160)
    assert.equal(handle.isHeld, false)
    assert.equal(await lock.isLocked('expiry'), false)
    const next = await lock.tryAcquire('expiry', 5000)
    assert.notEqual(next, null)
    await next.release()
    // The expired holder's release and extend touch nothing that is not theirs.
    await handle.release()
    assert.equal(await lock.isLocked('expiry'), false)
  })

  test('fences increase with every acquisition, and a stale fence cannot write', async () => {
    const url = backend.url
    const lock = new DistributedLock(url)
    const other = new DistributedLock(url)
    const fences = []
    for (let i = 0; i < 5; i++) {
      const handle = await (i % 2 ? other : lock).acquire('fenced', 5000)
      fences.push(BigInt(handle.fence))
      await handle.release()
    }
    assert.ok(fences.every((f, i) => i === 0 || f > fences[i - 1]), fences.join(' '))
    const first = await lock.acquire('fenced-store', 100)
    await sleep(150)
    const second = await other.acquire('fenced-store', 5000)
    assert.equal(await lock.fencedSet('balance', '120', second.fence), true)
    assert.equal(await lock.fencedSet('balance', '100', first.fence), false)
    await second.release()
  })

  test('autoRefresh keeps a lock past its TTL, and a blocked thread loses it with notice', async () => {
    const lock = new DistributedLock(backend.url)
    const kept = await lock.acquire('refreshed', 150, { autoRefresh: true })
    await sleep(500)
    assert.equal(kept.isHeld, true)
    assert.equal(await lock.isLocked('refreshed'), true)
    await kept.release()
    assert.equal(await lock.isLocked('refreshed'), false)

    let lost = null
    const stalled = await lock.acquire('stalled', 100, { autoRefresh: true, onLost: (err) => (lost = err) })
    // Blocked past 3 x TTL: the watchdog stops refreshing a lock whose holder cannot act.
    const end = Date.now() + 450
    while (Date.now() < end);
    await sleep(250)
    assert.ok(lost, 'onLost was called')
    assert.equal(lost.code, 'ELOST')
    assert.equal(stalled.isHeld, false)
    assert.equal(await lock.isLocked('stalled'), false)
  })

  test('a release wakes a waiter at once, not at its next poll', async () => {
    const url = backend.url
    const holder = new DistributedLock(url)
    const waiter = new DistributedLock(url, { retryDelayMs: 5000 })
    const held = await holder.acquire('wake', 10_000)
    const waiting = waiter.waitForLock('wake', 8000, 5000)
    await sleep(100)
    const released = Date.now()
    await held.release()
    const handle = await waiting
    assert.ok(Date.now() - released < 1000, `woken after ${Date.now() - released} ms`)
    assert.equal(handle.isHeld, true)
    await handle.release()
  })

  test('a fair lock is taken in the order its waiters came', async () => {
    const url = backend.url
    const holder = new DistributedLock(url, { fair: true })
    const held = await holder.acquire('fair', 10_000)
    const order = []
    const waiters = []
    for (let i = 0; i < 3; i++) {
      const lock = new DistributedLock(url, { fair: true, retryDelayMs: 20 })
      waiters.push(
        lock.waitForLock('fair', 8000, 5000).then(async (handle) => {
          order.push(i)
          await sleep(10)
          await handle.release()
        }),
      )
      await sleep(60) // each takes its place in line before the next comes
    }
    await held.release()
    await Promise.all(waiters)
    assert.deepEqual(order, [0, 1, 2])
  })

  test('ExclusiveLock and DistributedLockService take the same URL', async () => {
    const url = backend.url
    const exclusive = new ExclusiveLock({ name: 'shared-name', cache_connection: url, lock_ttl_ms: 1000, lock_refresh_ms: 300 })
    exclusive.on('error', () => {})
    assert.equal(await exclusive.acquire(), true)
    const inspected = await exclusive.inspect()
    assert.equal(inspected.lock_contents, '1')
    const rival = new ExclusiveLock({ name: 'shared-name', cache_connection: url })
    rival.on('error', () => {})
    assert.equal(await rival.acquire(), false)
    await exclusive.release()
    assert.equal(await rival.acquire(), true)
    await rival.release()

    const service = new DistributedLockService('service-key', 1000, url)
    const other = new DistributedLockService('service-key', 1000, url)
    assert.equal(await service.acquire(1000, 0), true)
    assert.equal(await other.acquire(1000, 100), false)
    assert.equal(await service.release(), true)
    assert.equal(await other.acquire(1000, 100), true)
    assert.equal(await other.release(), true)
    await service.disconnect()
    await other.disconnect()
  })

  test('worker_threads share one lock table', async () => {
    const url = backend.url
    const lock = new DistributedLock(url)
    const worker = new Worker(
      `
      const { parentPort, workerData } = require('node:worker_threads')
      const { DistributedLock } = require(workerData.entry)
      const lock = new DistributedLock(workerData.url)
      lock.acquire('threads', 10_000).then((handle) => {
        parentPort.postMessage('held')
        parentPort.once('message', () => handle.release().then(() => parentPort.postMessage('released')))
      })
      `,
      { eval: true, workerData: { url, entry: path.join(__dirname, '..') } },
    )
    const next = () => new Promise((resolve) => worker.once('message', resolve))
    assert.equal(await next(), 'held')
    assert.equal(await lock.tryAcquire('threads', 1000), null)
    worker.postMessage('release')
    assert.equal(await next(), 'released')
    const mine = await lock.tryAcquire('threads', 1000)
    assert.notEqual(mine, null)
    await mine.release()
    await worker.terminate()
  })

  test('a process that released its locks exits at once', async () => {
    const script = `
      const { DistributedLock, ExclusiveLock } = require(${JSON.stringify(path.join(__dirname, '..'))})
      const url = ${JSON.stringify(backend.url)}
      ;(async () => {
        const lock = new DistributedLock(url)
        const handle = await lock.acquire('exit', 5000, { autoRefresh: true })
        await handle.release()
        const exclusive = new ExclusiveLock({ name: 'exit', cache_connection: url })
        await exclusive.acquire()
        await exclusive.release()
        console.log('done')
      })()
    `
    const started = Date.now()
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (chunk) => (out += chunk))
    const code = await new Promise((resolve) => child.on('exit', resolve))
    assert.equal(code, 0)
    assert.equal(out.trim(), 'done')
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`)
  })
})
