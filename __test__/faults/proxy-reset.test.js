'use strict'

// Doubt without a loss: a proxy between the holder and Redis resets every connection while
// Redis stays up. The holder is told `suspended` at once (its lock in doubt: `isHeld` false),
// then `resumed` when a refresh confirms it on the new connection; never `lost`, and Redis
// still names it the holder.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../helpers/redis-server')
const { startProxy } = require('../helpers/tcp-proxy')
const Redis = require('ioredis')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('../..')
const syncguard = require('../../syncguard')

const BOUND_MS = 2000

let server
let proxy

before(async () => {
  server = await startRedis()
  proxy = await startProxy(server.port)
})

after(async () => {
  await proxy?.close()
  await server?.close()
})

/** Resolves with `value` when `register` calls its callback; rejects after `ms`. */
function told(what, ms = BOUND_MS) {
  let done
  const promise = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not told ${what} within ${ms} ms`)), ms)
    done = (value) => {
      clearTimeout(timer)
      resolve(value)
    }
  })
  return { promise, done }
}

/** Resolves once `check()` is true, polling every 2 ms; rejects after `ms`. */
async function until(check, what, ms = BOUND_MS) {
  const deadline = performance.now() + ms
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`not ${what} within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

/** `call()`, again while it fails for want of an answer (ECONNECTION), 5 times at most. */
async function answered(call) {
  for (let tries = 1; ; tries++) {
    try {
      return await call()
    } catch (err) {
      if (err.code !== 'ECONNECTION' || tries === 5) throw err
    }
  }
}

/** An `onEvent` hook and a console-shaped logger, each keeping what it hears. */
function tracing() {
  const events = []
  const lines = []
  const level = (name) => (message, fields) => lines.push([name, message, fields.type, fields.key])
  const logger = { debug: level('debug'), info: level('info'), warn: level('warn'), error: level('error') }
  const doubts = () => events.filter((e) => e.type === 'suspended' || e.type === 'resumed').map((e) => [e.type, e.api, e.key])
  const logged = () => lines.filter(([, , type]) => type === 'suspended' || type === 'resumed').map(([lvl, , type, key]) => [lvl, type, key])
  return { onEvent: (event) => events.push(event), logger, doubts, logged }
}

test('DistributedLock: a reset connection suspends an autoRefresh hold, then resumes it; no false loss', async () => {
  const traced = tracing()
  const lock = new DistributedLock(proxy.url, { logger: traced.logger, onEvent: traced.onEvent })
  const observer = new DistributedLock(server.url)
  const suspended = told('suspended')
  const resumed = told('resumed')
  const events = []
  const handle = await lock.acquire('reset:dl', 3000, {
    autoRefresh: true,
    onSuspended: (h) => {
      events.push('suspended')
      suspended.done({ isHeld: h.isHeld, suspended: h.suspended })
    },
    onResumed: (h) => {
      events.push('resumed')
      resumed.done({ isHeld: h.isHeld, suspended: h.suspended })
    },
    onLost: () => events.push('lost'),
  })
  assert.equal(handle.isHeld, true)
  assert.equal(handle.suspended, false)
  proxy.reset()
  assert.deepEqual(await suspended.promise, { isHeld: false, suspended: true }, 'in doubt while suspended')
  assert.deepEqual(await resumed.promise, { isHeld: true, suspended: false }, 'held again once confirmed')
  assert.deepEqual(events, ['suspended', 'resumed'])
  assert.deepEqual(traced.doubts(), [
    ['suspended', 'DistributedLock', 'reset:dl'],
    ['resumed', 'DistributedLock', 'reset:dl'],
  ])
  assert.deepEqual(traced.logged(), [
    ['warn', 'suspended', 'reset:dl'],
    ['info', 'resumed', 'reset:dl'],
  ])
  assert.equal(await observer.isLocked('reset:dl'), true, 'Redis still names a holder')
  await handle.release()
  assert.deepEqual(events, ['suspended', 'resumed'], 'no lost')
})

test('ExclusiveLock: a reset connection emits suspended then resumed, acquired false between', async () => {
  const traced = tracing()
  const ex = new ExclusiveLock({
    name: 'reset-ex',
    lock_ttl_ms: 3000,
    lock_refresh_ms: 1000,
    cache_connection: proxy.url,
    logger: traced.logger,
    onEvent: traced.onEvent,
  })
  const events = []
  const suspended = told('suspended')
  const resumed = told('resumed')
  ex.on('suspended', (payload) => {
    events.push('suspended')
    suspended.done({ payload, acquired: ex.acquired })
  })
  ex.on('resumed', (payload) => {
    events.push('resumed')
    resumed.done({ payload, acquired: ex.acquired })
  })
  ex.on('error', (err) => events.push(`error ${err.code}`))
  assert.equal(await ex.acquire(), true)
  proxy.reset()
  const s = await suspended.promise
  assert.equal(s.acquired, false)
  assert.equal(s.payload.key, ex.key)
  const r = await resumed.promise
  assert.equal(r.acquired, true)
  assert.deepEqual(events, ['suspended', 'resumed'])
  assert.deepEqual(traced.doubts(), [
    ['suspended', 'ExclusiveLock', ex.key],
    ['resumed', 'ExclusiveLock', ex.key],
  ])
  assert.deepEqual(traced.logged(), [
    ['warn', 'suspended', ex.key],
    ['info', 'resumed', ex.key],
  ])
  await ex.release()
  assert.deepEqual(events, ['suspended', 'resumed'], 'no error (no loss)')
})

test('maestro: a reset connection calls onSuspended then onResumed; the lock stays held', async () => {
  const suspended = told('suspended')
  const resumed = told('resumed')
  const traced = tracing()
  const service = new DistributedLockService('reset:maestro', 3000, proxy.url, {
    onEvent: traced.onEvent,
    onSuspended: (s) => suspended.done(s.suspended),
    onResumed: (s) => resumed.done(s.suspended),
  })
  assert.equal(await service.acquire(), true)
  proxy.reset()
  assert.equal(await suspended.promise, true)
  assert.equal(await resumed.promise, false)
  assert.equal(service.isLocked, true)
  assert.deepEqual(traced.doubts(), [
    ['suspended', 'DistributedLockService', 'reset:maestro'],
    ['resumed', 'DistributedLockService', 'reset:maestro'],
  ])
  assert.equal(await service.release(), true)
})

test('syncguard: across a reset, lookup and owns tell the truth (held), extend and release find the lock ours', async () => {
  // syncguard keeps nothing that could be in doubt: each call asks Redis. A call caught by the
  // reset may fail ServiceUnavailable (its reply lost); asked again, every answer is "held".
  const backend = syncguard.createRedisBackend(proxy.url, { keyPrefix: 'reset-sg', commandTimeoutMs: 1000 })
  const raw = new Redis(server.port, '127.0.0.1', { lazyConnect: true })
  const again = async (call) => {
    for (let tries = 1; ; tries++) {
      try {
        return await call()
      } catch (err) {
        if (err.code !== 'ServiceUnavailable' || tries === 5) throw err
      }
    }
  }
  try {
    await raw.connect()
    const won = await backend.acquire({ key: 'held', ttlMs: 10_000 })
    assert.equal(won.ok, true, JSON.stringify(won))
    const before = await syncguard.getByKey(backend, 'held')
    proxy.reset()
    // Racing the reset, then after it: never "gone" while Redis holds the lock.
    const racing = await Promise.allSettled([
      syncguard.owns(backend, won.lockId),
      backend.lookup({ key: 'held' }),
      backend.isLocked({ key: 'held' }),
    ])
    for (const r of racing) {
      if (r.status === 'rejected') assert.equal(r.reason.code, 'ServiceUnavailable', String(r.reason))
      else assert.ok(r.value === true || (r.value && r.value.fence === won.fence), `a call racing the reset said gone: ${JSON.stringify(r.value)}`)
    }
    assert.equal(await again(() => syncguard.owns(backend, won.lockId)), true, 'owns after the reset')
    const after = await again(() => syncguard.getByKey(backend, 'held'))
    assert.equal(after?.fence, before.fence, 'the same lock, found by key')
    assert.equal((await again(() => syncguard.getById(backend, won.lockId)))?.fence, won.fence, 'found by lockId')
    assert.equal(await again(() => backend.isLocked({ key: 'held' })), true)
    assert.ok(await raw.pttl('reset-sg:held') > 5000, 'Redis still holds it with its TTL')
    const extended = await again(() => backend.extend({ lockId: won.lockId, ttlMs: 10_000 }))
    assert.equal(extended.ok, true, 'no false loss: the extend finds it ours')
    assert.equal((await again(() => backend.release({ lockId: won.lockId }))).ok, true)
    assert.equal(await backend.isLocked({ key: 'held' }), false)
  } finally {
    raw.disconnect()
  }
})

test('syncguard lock(fn): a reset during fn: fn\'s result, the lock released, nothing left', async () => {
  const backend = syncguard.createRedisBackend(proxy.url, { keyPrefix: 'reset-sg', commandTimeoutMs: 1000 })
  const observer = syncguard.createRedisBackend(server.url, { keyPrefix: 'reset-sg' })
  const result = await syncguard.lock(backend, async () => {
    assert.equal(await observer.isLocked({ key: 'fn' }), true)
    proxy.reset()
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.equal(await observer.isLocked({ key: 'fn' }), true, 'the reset took nothing from Redis')
    return 'done'
  }, { key: 'fn', ttlMs: 10_000 })
  assert.equal(result, 'done')
  assert.equal(await observer.isLocked({ key: 'fn' }), false, 'released after fn, over the new connection')
})

test('RESP2 (a server without HELLO): the reset is noticed at the next refresh, then suspended and resumed', async () => {
  const resp2 = await startRedis({ args: ['--rename-command', 'HELLO', ''] })
  const resp2Proxy = await startProxy(resp2.port)
  try {
    const lock = new DistributedLock(resp2Proxy.url)
    const events = []
    const resumed = told('resumed', 5000)
    // TTL 600: refreshed every 200 ms, so the next refresh finds the reset soon.
    const handle = await lock.acquire('reset:resp2', 600, {
      autoRefresh: true,
      onSuspended: (h) => events.push(`suspended ${h.isHeld}`),
      onResumed: (h) => {
        events.push(`resumed ${h.isHeld}`)
        resumed.done()
      },
      onLost: () => events.push('lost'),
    })
    resp2Proxy.reset()
    await resumed.promise
    assert.deepEqual(events, ['suspended false', 'resumed true'])
    await handle.release()
  } finally {
    await resp2Proxy.close()
    await resp2.close()
  }
})

test('DistributedLock: a plain handle (no autoRefresh) is in doubt after a reset until its extend confirms it, or finds it gone', async () => {
  // A connection of its own (another connect timeout): no other test's traffic on it.
  const lock = new DistributedLock(proxy.url, { connectTimeoutMs: 4321 })
  const raw = new Redis(server.port, '127.0.0.1', { lazyConnect: true })
  try {
    const kept = await lock.acquire('reset:plain', 10_000)
    const gone = await lock.acquire('reset:plain-gone', 10_000)
    assert.deepEqual([kept.isHeld, kept.suspended, gone.isHeld], [true, false, true])
    await raw.connect()
    await raw.del('lock:reset:plain-gone')
    proxy.reset()
    await until(() => kept.suspended && gone.suspended, 'in doubt')
    assert.equal(kept.isHeld, false, 'in doubt: not held, though its TTL has not run out')
    assert.equal(kept.info.isHeld, false)
    assert.equal(gone.isHeld, false)
    // Its extend confirms it: held again, until the next drop. (An extend sent on a socket
    // whose reset it has not read yet fails ECONNECTION, unanswered: sent again, as a caller would.)
    await answered(() => kept.extend(1000))
    assert.deepEqual([kept.isHeld, kept.suspended], [true, false])
    // The other's finds it gone: not held, and no longer in doubt either.
    await assert.rejects(answered(() => gone.extend(1000)), { code: 'ENOTHELD' })
    assert.deepEqual([gone.isHeld, gone.suspended], [false, false])
    await kept.release()
    assert.deepEqual([kept.isHeld, kept.suspended], [false, false])
  } finally {
    raw.disconnect()
  }
})

test('using(fn, { autoRefresh }): fn ending in doubt waits for the doubt to end; resumed, it resolves with fn\'s result', async () => {
  const lock = new DistributedLock(proxy.url)
  const events = []
  let suspendedAtEnd = null
  try {
    const result = await lock.using(
      'reset:using',
      async (handle) => {
        // Slow to answer after the reset: fn ends before any refresh confirms the lock.
        proxy.setDelay(300)
        proxy.reset()
        await until(() => handle.suspended, 'suspended')
        suspendedAtEnd = handle.suspended
        return 'done'
      },
      {
        autoRefresh: true,
        ttlMs: 3000,
        onSuspended: () => events.push('suspended'),
        onResumed: () => events.push('resumed'),
        onLost: () => events.push('lost'),
      },
    )
    assert.equal(suspendedAtEnd, true, 'fn ended while in doubt')
    assert.equal(result, 'done')
    assert.deepEqual(events, ['suspended', 'resumed'])
  } finally {
    proxy.setDelay(0)
  }
  assert.equal(await new DistributedLock(server.url).isLocked('reset:using'), false, 'released once resumed')
})

test('using(fn, { autoRefresh }): fn ending in doubt, the lock then found gone: ELOST', async () => {
  const lock = new DistributedLock(proxy.url)
  const raw = new Redis(server.port, '127.0.0.1', { lazyConnect: true })
  const events = []
  let suspendedAtEnd = null
  try {
    await raw.connect()
    const using = lock.using(
      'reset:using-lost',
      async (handle) => {
        await raw.del('lock:reset:using-lost')
        proxy.setDelay(300)
        proxy.reset()
        await until(() => handle.suspended, 'suspended')
        suspendedAtEnd = handle.suspended
        return 'done'
      },
      { autoRefresh: true, ttlMs: 3000, onLost: () => events.push('lost'), onResumed: () => events.push('resumed') },
    )
    await assert.rejects(using, { code: 'ELOST' })
    assert.equal(suspendedAtEnd, true, 'fn ended while in doubt')
    assert.deepEqual(events, ['lost'])
  } finally {
    proxy.setDelay(0)
    raw.disconnect()
  }
})

test('using(fn, { autoRefresh, signal }): aborted while it waits out a doubt, it rejects with the reason at once', async () => {
  const lock = new DistributedLock(proxy.url)
  const controller = new AbortController()
  const reason = new Error('gave up on the doubt')
  let abortedAt = 0
  try {
    const using = lock.using(
      'reset:using-abort',
      async (handle) => {
        // No refresh can confirm the lock for a second: fn ends in doubt, and stays so.
        proxy.setDelay(1000)
        proxy.reset()
        await until(() => handle.suspended, 'suspended')
        setTimeout(() => {
          abortedAt = performance.now()
          controller.abort(reason)
        }, 20)
        return 'done'
      },
      { autoRefresh: true, ttlMs: 3000, signal: controller.signal },
    )
    await assert.rejects(using, (err) => err === reason)
    const ms = performance.now() - abortedAt
    assert.ok(abortedAt > 0 && ms < 200, `rejected ${ms.toFixed(0)} ms after the abort`)
  } finally {
    proxy.setDelay(0)
  }
})

/** A plain using() on `key` whose fn provokes a call timeout (no answer within commandTimeoutMs), then runs `after`. */
async function usingThroughTimeout(key, after) {
  // A connection of its own (another connect timeout): no other test's traffic on it.
  const lock = new DistributedLock(proxy.url, { commandTimeoutMs: 150, connectTimeoutMs: 4322 })
  let suspendedAtEnd = null
  try {
    const result = await lock.using(
      key,
      async (handle) => {
        proxy.setDelay(400)
        // The first goes over the JS thread's socket, which keeps its place for the late
        // reply; the second, with that socket busy, over the runtime's connection, which a
        // timeout abandons (fn checks below that the hold went in doubt).
        await assert.rejects(lock.isLocked(`${key}:other`), { code: 'ETIMEDOUT' })
        await assert.rejects(lock.isLocked(`${key}:other`), { code: 'ETIMEDOUT' })
        proxy.setDelay(0)
        await after()
        suspendedAtEnd = handle.suspended
        return 'done'
      },
      { ttlMs: 5000 },
    )
    return { result, suspendedAtEnd }
  } finally {
    proxy.setDelay(0)
  }
}

test('using(fn) without autoRefresh: a call timing out puts the hold in doubt; Redis still has it, so fn\'s result', async () => {
  const { result, suspendedAtEnd } = await usingThroughTimeout('timeout:plain', async () => {})
  assert.equal(suspendedAtEnd, true, 'fn ended while in doubt')
  assert.equal(result, 'done')
  assert.equal(await new DistributedLock(server.url).isLocked('timeout:plain'), false, 'released')
})

test('using(fn) without autoRefresh: in doubt after a call timeout, the lock in fact gone: ELOST', async () => {
  const raw = new Redis(server.port, '127.0.0.1', { lazyConnect: true })
  try {
    await raw.connect()
    await assert.rejects(
      usingThroughTimeout('timeout:plain-gone', () => raw.del('lock:timeout:plain-gone')),
      { code: 'ELOST' },
    )
  } finally {
    raw.disconnect()
  }
})
