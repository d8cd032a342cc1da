'use strict'

// Redis going away under a live DistributedLock: stopped, paused (SIGSTOP), or never there.
// Every call must settle within its bound with a connection/timeout LockError (never a
// LockAcquisitionError, never `isLocked() === false`), and work again once Redis is back.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis, freePort } = require('./helpers/redis-server')
const { DistributedLock, LockError, LockAcquisitionError, InvalidLockError } = require('..')

const unhandled = []
process.on('unhandledRejection', (reason) => {
  unhandled.push(reason)
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server

before(async () => {
  server = await startRedis()
})

after(async () => {
  if (server?.child && server.child.exitCode === null && server.child.signalCode === null) {
    try {
      server.resume() // a SIGSTOPped server would only die by the helper's SIGKILL fallback
    } catch {}
  }
  await server?.close()
})

/** Settles `promise`, timing it. */
async function settle(promise) {
  const started = performance.now()
  try {
    const value = await promise
    return { ok: true, value, ms: performance.now() - started }
  } catch (err) {
    return { ok: false, err, ms: performance.now() - started }
  }
}

/** Asserts a rejection with an infrastructure LockError whose code is one of `codes`. */
function assertInfraError(name, outcome, codes) {
  assert.equal(outcome.ok, false, `${name} resolved (${JSON.stringify(outcome.value)}) while Redis was unreachable`)
  const { err } = outcome
  assert.ok(err instanceof LockError, `${name}: expected a LockError, got ${err?.name}: ${err?.message}`)
  assert.ok(!(err instanceof LockAcquisitionError), `${name}: an outage is not contention (${err.message})`)
  assert.ok(!(err instanceof InvalidLockError), `${name}: an outage does not mean the lock is lost`)
  assert.ok(codes.includes(err.code), `${name}: code ${err.code} (${err.message}), expected one of ${codes}`)
}

describe('Redis stopped mid-test, then started again', () => {
  const options = { commandTimeoutMs: 1000, connectTimeoutMs: 1000 }
  let lock
  let retrying
  let held

  test('with a lock held, every call rejects with ECONNECTION/ETIMEDOUT and none hangs', async () => {
    lock = new DistributedLock(server.url, options)
    retrying = new DistributedLock(server.url, { ...options, maxRetries: 3 })
    held = await lock.acquire('outage:held', 30_000)
    assert.equal(await lock.isLocked('outage:held'), true)

    await server.stop()

    const calls = {
      acquire: () => lock.acquire('outage:other', 5000),
      'acquire with maxRetries 3': () => retrying.acquire('outage:other', 5000),
      tryAcquire: () => lock.tryAcquire('outage:other', 5000),
      'waitForLock(key, 300)': () => lock.waitForLock('outage:other', 300, 5000),
      'isLocked(held key)': () => lock.isLocked('outage:held'),
      'isLocked(free key)': () => lock.isLocked('outage:other'),
      'handle.extend': () => held.extend(5000),
      'handle.release': () => held.release(),
      'using': () => lock.using('outage:other', () => 'ran'),
    }
    for (const [name, call] of Object.entries(calls)) {
      const outcome = await settle(call())
      assertInfraError(name, outcome, ['ECONNECTION', 'ETIMEDOUT'])
      assert.ok(outcome.ms < options.commandTimeoutMs + 1000, `${name} took ${outcome.ms.toFixed(0)} ms to settle`)
    }
    // A failed release must not pretend the lock is gone (Redis was never asked): the handle
    // is in doubt, as the drop left it (not held, not released either).
    assert.equal(held.isHeld, false)
    assert.equal(held.suspended, true)
  })

  test('calls made concurrently during the outage all settle too', async () => {
    const outcomes = await Promise.all([
      settle(lock.acquire('outage:concurrent-a', 5000)),
      settle(lock.tryAcquire('outage:concurrent-b', 5000)),
      settle(lock.isLocked('outage:concurrent-c')),
      settle(lock.waitForLock('outage:concurrent-d', 300, 5000)),
      settle(held.extend(1000)),
    ])
    outcomes.forEach((outcome, i) => {
      assertInfraError(`concurrent call ${i}`, outcome, ['ECONNECTION', 'ETIMEDOUT'])
      assert.ok(outcome.ms < options.commandTimeoutMs + 1000, `call ${i} took ${outcome.ms.toFixed(0)} ms`)
    })
  })

  test('after server.start() the same instance works again within a couple of attempts', async () => {
    await server.start() // same port, no persistence: the data is gone
    const deadline = Date.now() + 2000
    const failures = []
    let handle
    while (!handle) {
      const outcome = await settle(lock.acquire('outage:after-restart', 5000))
      if (outcome.ok) {
        handle = outcome.value
        break
      }
      assertInfraError(`acquire after restart (attempt ${failures.length + 1})`, outcome, ['ECONNECTION', 'ETIMEDOUT'])
      failures.push(outcome.err.message)
      assert.ok(Date.now() < deadline, `still failing 2 s after the restart: ${failures.join(' | ')}`)
      await sleep(100)
    }
    assert.ok(failures.length <= 2, `needed ${failures.length + 1} attempts: ${failures.join(' | ')}`)
    assert.equal(handle.isHeld, true)
    assert.equal(await lock.isLocked('outage:after-restart'), true)
    await handle.release()
    assert.equal(handle.isHeld, false)
    assert.equal(await lock.isLocked('outage:after-restart'), false)

    // The instance with retries works again too, and tryAcquire / waitForLock.
    const again = await retrying.acquire('outage:after-restart', 5000)
    assert.equal(await lock.tryAcquire('outage:after-restart', 5000), null)
    await again.release()
    const waited = await lock.waitForLock('outage:after-restart', 1000, 5000)
    await waited.release()
  })

  test('a handle whose lock was lost with the data cannot be extended (ENOTHELD), release is a no-op', async () => {
    assert.equal(await lock.isLocked('outage:held'), false, 'the restarted server has no data')
    await assert.rejects(held.extend(1000), (err) => {
      assert.ok(err instanceof InvalidLockError, `got ${err?.name}: ${err?.message}`)
      assert.equal(err.code, 'ENOTHELD')
      assert.equal(err.key, 'outage:held')
      return true
    })
    await held.release()
    assert.equal(held.isHeld, false)
  })
})

describe('Redis paused (SIGSTOP)', () => {
  const options = { commandTimeoutMs: 300, connectTimeoutMs: 1000 }

  test('calls reject with ETIMEDOUT after about commandTimeoutMs, then work again after resume', async () => {
    const lock = new DistributedLock(server.url, options)
    // Open the connection and load every script before pausing.
    const warm = await lock.acquire('paused:warm', 5000)
    await warm.extend(1000)
    await warm.release()
    const held = await lock.acquire('paused:held', 30_000)

    const touched = ['paused:a', 'paused:b', 'paused:c']
    server.pause()
    try {
      const calls = {
        acquire: () => lock.acquire('paused:a', 5000),
        tryAcquire: () => lock.tryAcquire('paused:b', 5000),
        'waitForLock(key, 2000)': () => lock.waitForLock('paused:c', 2000, 5000),
        isLocked: () => lock.isLocked('paused:held'),
        'handle.extend': () => held.extend(5000),
        'handle.release': () => held.release(),
      }
      for (const [name, call] of Object.entries(calls)) {
        const outcome = await settle(call())
        assertInfraError(name, outcome, ['ETIMEDOUT'])
        assert.ok(outcome.ms >= 250, `${name} rejected after ${outcome.ms.toFixed(0)} ms, before the 300 ms bound`)
        assert.ok(outcome.ms < 1500, `${name} took ${outcome.ms.toFixed(0)} ms`)
      }

      // A new connection to a stopped server: TCP connects (the kernel accepts), the
      // handshake never answers; the call is still bounded.
      const fresh = new DistributedLock(server.url, { commandTimeoutMs: 300, connectTimeoutMs: 2500 })
      const outcome = await settle(fresh.isLocked('paused:held'))
      assertInfraError('isLocked on a new connection', outcome, ['ETIMEDOUT', 'ECONNECTION'])
      assert.ok(outcome.ms >= 250 && outcome.ms < 1500, `took ${outcome.ms.toFixed(0)} ms`)
    } finally {
      server.resume()
    }

    // Back: the same instance answers again.
    let answer
    const deadline = Date.now() + 2000
    for (;;) {
      const outcome = await settle(lock.isLocked('paused:held'))
      if (outcome.ok) {
        answer = outcome.value
        break
      }
      assertInfraError('isLocked after resume', outcome, ['ETIMEDOUT', 'ECONNECTION'])
      assert.ok(Date.now() < deadline, 'no answer 2 s after resume')
      await sleep(50)
    }
    // The release sent during the pause ran once Redis woke up, or the lock is still held;
    // either way the answer is a boolean consistent with Redis.
    assert.equal(typeof answer, 'boolean')
    const handle = await lock.acquire('paused:after', 5000)
    assert.equal(await lock.isLocked('paused:after'), true)
    await handle.release()
    assert.equal(await lock.isLocked('paused:after'), false)

    // Attempts that timed out during the pause must not leave their keys locked by a token
    // nobody holds once Redis catches up (the library releases them in the background).
    const stillLocked = []
    const freeBy = Date.now() + 2000
    for (const key of touched) {
      while ((await lock.isLocked(key)) && Date.now() < freeBy) await sleep(50)
      if (await lock.isLocked(key)) stillLocked.push(key)
    }
    assert.deepEqual(stillLocked, [], 'keys left locked by timed-out attempts')
    const reacquired = await lock.tryAcquire('paused:a', 5000)
    assert.ok(reacquired, 'paused:a is acquirable after the pause')
    await reacquired.release()
    await held.release().catch(() => {})
  })

  test('a fresh instance created after resume works at once', async () => {
    const lock = new DistributedLock(server.url, { commandTimeoutMs: 300, connectTimeoutMs: 3000 })
    const handle = await lock.acquire('paused:fresh-after', 5000)
    assert.equal(handle.isHeld, true)
    await handle.release()
    assert.equal(await lock.isLocked('paused:fresh-after'), false)
  })
})

describe('nothing listening on the port', () => {
  let port
  before(async () => {
    port = await freePort()
  })

  // The connection manager makes a few quick reconnect attempts (about 0.5-1 s in all)
  // before failing the call; "quickly" means well before every other bound in play (5 s).
  test('every call rejects with ECONNECTION quickly', async () => {
    const lock = new DistributedLock(`redis://127.0.0.1:${port}`, { commandTimeoutMs: 5000, connectTimeoutMs: 5000 })
    const calls = {
      acquire: () => lock.acquire('dead:a', 5000),
      tryAcquire: () => lock.tryAcquire('dead:b', 5000),
      'waitForLock(key, 5000)': () => lock.waitForLock('dead:c', 5000, 5000),
      isLocked: () => lock.isLocked('dead:d'),
      using: () => lock.using('dead:e', () => 'ran'),
    }
    for (const [name, call] of Object.entries(calls)) {
      const outcome = await settle(call())
      assertInfraError(name, outcome, ['ECONNECTION'])
      assert.ok(outcome.ms < 2000, `${name} took ${outcome.ms.toFixed(0)} ms`)
    }
  })

  test('acquire with retries does not retry a refused connection as if it were contention', async () => {
    const lock = new DistributedLock({ host: '127.0.0.1', port }, { maxRetries: 5, retryDelayMs: 3000 })
    const outcome = await settle(lock.acquire('dead:retries', 5000))
    assertInfraError('acquire', outcome, ['ECONNECTION'])
    // Even one retry would add a 3000 ms backoff to the ~0.5-1 s a failed connection takes.
    assert.ok(outcome.ms < 2500, `took ${outcome.ms.toFixed(0)} ms`)
  })
})

describe('an outage longer than the reconnect budget', () => {
  test('the first call once Redis is back succeeds', async () => {
    const own = await startRedis()
    try {
      const lock = new DistributedLock(own.url, { commandTimeoutMs: 3000 })
      assert.equal(await lock.isLocked('long-outage'), false)
      await own.stop()
      assertInfraError('isLocked while down', await settle(lock.isLocked('long-outage')), ['ECONNECTION'])
      await sleep(1500) // past the ~0.8 s of reconnect attempts: the manager gave up
      await own.start()
      const first = await settle(lock.isLocked('long-outage'))
      assert.equal(first.ok, true, `first call after the outage failed: ${first.err?.message}`)
      assert.equal(first.value, false)
    } finally {
      await own.close()
    }
  })
})

test('no unhandled promise rejections happened', async () => {
  // Background work (e.g. releases of timed-out attempts) gets a moment to settle first.
  await sleep(300)
  assert.deepEqual(
    unhandled.map((r) => String(r?.stack ?? r)),
    [],
  )
})
