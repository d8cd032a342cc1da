'use strict'

// DistributedLock / LockHandle behaviour, on a private redis-server or (NRL_BACKEND=memory)
// on the embedded memory:// backend.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const path = require('node:path')
const { pathToFileURL } = require('node:url')
const { startBackend, redisOnly } = require('./helpers/backend')
const { fenceKey } = require('./helpers/keys')
const {
  DistributedLock,
  LockHandle,
  LockError,
  LockAcquisitionError,
  InvalidLockError,
} = require('..')

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let backend
let redis // our own client, to look at what landed in the store
let lock // default options, connected by URL
let lockB // a second instance over a second connection (different host spelling)

/** Resolves once Redis no longer has `key` (expired), failing after `timeoutMs`. */
async function waitUntilGone(key, timeoutMs = 3000) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if ((await redis.exists(key)) === 0) return
    await sleep(20)
  }
  throw new Error(`key ${JSON.stringify(key)} still exists after ${timeoutMs} ms`)
}

function assertAcquisitionError(err, key) {
  assert.ok(err instanceof LockAcquisitionError, `expected LockAcquisitionError, got ${err}`)
  assert.ok(err instanceof LockError)
  assert.ok(err instanceof Error)
  assert.equal(err.code, 'ELOCKED')
  assert.equal(err.key, key)
  return true
}

function assertInvalidLock(err, key) {
  assert.ok(err instanceof InvalidLockError, `expected InvalidLockError, got ${err}`)
  assert.ok(err instanceof LockError)
  assert.equal(err.code, 'ENOTHELD')
  assert.equal(err.key, key)
  return true
}

before(async () => {
  backend = await startBackend()
  redis = backend.client()
  lock = new DistributedLock(backend.url)
  lockB = new DistributedLock(backend.alias)
})

after(async () => {
  if (redis) redis.disconnect()
  if (backend) await backend.close()
})

describe('defaults', () => {
  test('the key is lock:<key>, its value is the handle token (a UUID v4), TTL 30 s', async () => {
    const key = 'defaults:key-and-ttl'
    const handle = await lock.acquire(key)
    try {
      assert.ok(handle instanceof LockHandle)
      assert.equal(handle.key, key)
      assert.match(handle.token, UUID_V4)
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      assert.equal(await redis.exists(key), 0, 'the bare key must not be used')
      const pttl = await redis.pttl(`lock:${key}`)
      assert.ok(pttl > 29000 && pttl <= 30000, `PTTL ${pttl} not in (29000, 30000]`)
    } finally {
      await handle.release()
    }
  })

  test('tokens differ between acquisitions', async () => {
    const key = 'defaults:tokens-differ'
    const a = await lock.acquire(key)
    await a.release()
    const b = await lock.acquire(key)
    await b.release()
    assert.match(a.token, UUID_V4)
    assert.match(b.token, UUID_V4)
    assert.notEqual(a.token, b.token)
  })

  test('maxRetries defaults to 0: a held key makes acquire reject at once', async () => {
    const key = 'defaults:max-retries-0'
    const holder = await lockB.acquire(key, 10000)
    try {
      const started = performance.now()
      await assert.rejects(lock.acquire(key), (err) => {
        assertAcquisitionError(err, key)
        assert.equal(err.retriesAttempted, 0)
        return true
      })
      const elapsed = performance.now() - started
      // "At once": no retry loop (retriesAttempted above says 0 retries were made).
      assert.ok(elapsed < 1000, `acquire took ${elapsed} ms`)
      assert.equal(await redis.get(`lock:${key}`), holder.token)
    } finally {
      await holder.release()
    }
  })

  test('custom keyPrefix and defaultTtlMs are honoured', async () => {
    const key = 'defaults:custom'
    const custom = new DistributedLock(backend.url, { keyPrefix: 'myapp:', defaultTtlMs: 5000 })
    const handle = await custom.acquire(key)
    try {
      assert.equal(await redis.get(`myapp:${key}`), handle.token)
      assert.equal(await redis.exists(`lock:${key}`), 0)
      const pttl = await redis.pttl(`myapp:${key}`)
      assert.ok(pttl > 4000 && pttl <= 5000, `PTTL ${pttl} not in (4000, 5000]`)
      assert.equal(await custom.isLocked(key), true)
      assert.equal(await lock.isLocked(key), false, 'the default prefix sees another key')
    } finally {
      await handle.release()
    }
    assert.equal(await redis.exists(`myapp:${key}`), 0)
  })

  test('an explicit ttlMs wins over defaultTtlMs', async () => {
    const key = 'defaults:explicit-ttl'
    const custom = new DistributedLock(backend.url, { defaultTtlMs: 5000 })
    const handle = await custom.acquire(key, 60000)
    try {
      const pttl = await redis.pttl(`lock:${key}`)
      assert.ok(pttl > 59000 && pttl <= 60000, `PTTL ${pttl} not in (59000, 60000]`)
    } finally {
      await handle.release()
    }
  })
})

describe('acquire, tryAcquire, waitForLock, isLocked', () => {
  test('tryAcquire returns a LockHandle, then null while the key is held', async () => {
    const key = 'try:held'
    const first = await lock.tryAcquire(key, 10000)
    try {
      assert.ok(first instanceof LockHandle)
      assert.equal(first.isHeld, true)
      const second = await lock.tryAcquire(key, 10000)
      assert.equal(second, null)
      const other = await lockB.tryAcquire(key, 10000)
      assert.equal(other, null)
      assert.equal(await redis.get(`lock:${key}`), first.token)
    } finally {
      await first.release()
    }
    const again = await lock.tryAcquire(key, 10000)
    assert.ok(again instanceof LockHandle)
    await again.release()
  })

  test('tryAcquire with a ttlMs sets that TTL', async () => {
    const key = 'try:ttl'
    const handle = await lock.tryAcquire(key, 7000)
    try {
      const pttl = await redis.pttl(`lock:${key}`)
      assert.ok(pttl > 6000 && pttl <= 7000, `PTTL ${pttl}`)
    } finally {
      await handle.release()
    }
  })

  test('waitForLock gets the lock once the holder releases', async () => {
    const key = 'wait:released'
    const holder = await lockB.acquire(key, 20000)
    const started = performance.now()
    const timer = setTimeout(() => holder.release(), 300)
    try {
      const handle = await lock.waitForLock(key, 5000)
      const elapsed = performance.now() - started
      assert.ok(handle instanceof LockHandle)
      assert.ok(elapsed >= 250, `got the lock after ${elapsed} ms, before the release`)
      assert.ok(elapsed < 4000, `got the lock only after ${elapsed} ms`)
      assert.notEqual(handle.token, holder.token)
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      await handle.release()
    } finally {
      clearTimeout(timer)
      await holder.release()
    }
  })

  test('waitForLock gets the lock once the holder expires', async () => {
    const key = 'wait:expired'
    const holder = await lockB.acquire(key, 400)
    const started = performance.now()
    const handle = await lock.waitForLock(key, 5000)
    const elapsed = performance.now() - started
    try {
      assert.ok(elapsed >= 300, `got the lock after ${elapsed} ms`)
      assert.ok(elapsed < 4000, `got the lock only after ${elapsed} ms`)
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      assert.notEqual(handle.token, holder.token)
    } finally {
      await handle.release()
    }
  })

  test('waitForLock rejects with LockAcquisitionError after timeoutMs, not much later', async () => {
    const key = 'wait:timeout'
    const holder = await lockB.acquire(key, 20000)
    try {
      const started = performance.now()
      await assert.rejects(lock.waitForLock(key, 600), (err) => assertAcquisitionError(err, key))
      const elapsed = performance.now() - started
      assert.ok(elapsed >= 550, `rejected after ${elapsed} ms, before the timeout`)
      assert.ok(elapsed < 3000, `rejected only after ${elapsed} ms`)
      assert.equal(await redis.get(`lock:${key}`), holder.token)
    } finally {
      await holder.release()
    }
  })

  test('waitForLock with timeoutMs 0 makes one attempt', async () => {
    const key = 'wait:zero'
    const handle = await lock.waitForLock(key, 0)
    try {
      assert.ok(handle instanceof LockHandle)
      await assert.rejects(lockB.waitForLock(key, 0), (err) => assertAcquisitionError(err, key))
    } finally {
      await handle.release()
    }
  })

  test('waitForLock honours ttlMs', async () => {
    const key = 'wait:ttl'
    const handle = await lock.waitForLock(key, 1000, 8000)
    try {
      const pttl = await redis.pttl(`lock:${key}`)
      assert.ok(pttl > 7000 && pttl <= 8000, `PTTL ${pttl}`)
    } finally {
      await handle.release()
    }
  })

  test('acquire with maxRetries retries until the holder lets go', async () => {
    const key = 'acquire:retries'
    const retrying = new DistributedLock(backend.url, { maxRetries: 5, retryDelayMs: 50 })
    const holder = await lockB.acquire(key, 20000)
    const timer = setTimeout(() => holder.release(), 200)
    try {
      const started = performance.now()
      const handle = await retrying.acquire(key)
      const elapsed = performance.now() - started
      assert.ok(elapsed >= 150, `acquired after ${elapsed} ms`)
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      await handle.release()
    } finally {
      clearTimeout(timer)
      await holder.release()
    }
  })

  test('acquire with maxRetries reports the retries when it gives up', async () => {
    const key = 'acquire:gives-up'
    const retrying = new DistributedLock(backend.url, { maxRetries: 2, retryDelayMs: 20 })
    const holder = await lockB.acquire(key, 20000)
    try {
      const started = performance.now()
      await assert.rejects(retrying.acquire(key), (err) => {
        assertAcquisitionError(err, key)
        assert.equal(err.retriesAttempted, 2)
        return true
      })
      const elapsed = performance.now() - started
      // 20 + 40 ms of backoff at least.
      assert.ok(elapsed >= 55, `gave up after ${elapsed} ms`)
      assert.ok(elapsed < 3000, `gave up only after ${elapsed} ms`)
    } finally {
      await holder.release()
    }
  })

  test('isLocked is true while held, false when free and after release', async () => {
    const key = 'isLocked:basic'
    assert.equal(await lock.isLocked(key), false)
    const handle = await lock.acquire(key)
    assert.equal(await lock.isLocked(key), true)
    assert.equal(await lockB.isLocked(key), true)
    await handle.release()
    assert.equal(await lock.isLocked(key), false)
    assert.equal(await lockB.isLocked(key), false)
  })

  test('isLocked sees a key that someone else set', async () => {
    const key = 'isLocked:foreign'
    await redis.set(`lock:${key}`, 'someone-else', 'PX', 10000)
    try {
      assert.equal(await lock.isLocked(key), true)
      assert.equal(await lock.tryAcquire(key), null)
    } finally {
      await redis.del(`lock:${key}`)
    }
  })
})

describe('LockHandle', () => {
  test('release deletes the key; a second release resolves harmlessly', async () => {
    const key = 'handle:release'
    const handle = await lock.acquire(key)
    assert.equal(await redis.exists(`lock:${key}`), 1)
    await handle.release()
    assert.equal(await redis.exists(`lock:${key}`), 0)
    assert.equal(handle.isHeld, false)
    await handle.release()
    assert.equal(handle.isHeld, false)
    // A second release must not delete a lock someone took in between.
    const next = await lockB.acquire(key)
    await handle.release()
    assert.equal(await redis.get(`lock:${key}`), next.token)
    await next.release()
  })

  test('extend adds to the remaining TTL', async () => {
    const key = 'handle:extend'
    const handle = await lock.acquire(key, 10000)
    try {
      await sleep(300)
      const before = await redis.pttl(`lock:${key}`)
      assert.ok(before < 9800, `PTTL before extend ${before}`)
      const expiresBefore = handle.info.expiresAt
      await handle.extend(5000)
      const afterExtend = await redis.pttl(`lock:${key}`)
      assert.ok(afterExtend <= before + 5000, `PTTL ${afterExtend} > ${before} + 5000`)
      assert.ok(afterExtend > before + 5000 - 500, `PTTL ${afterExtend} far below ${before} + 5000`)
      // Not a reset to 5000 nor to ttl + 5000.
      assert.ok(afterExtend > 10000, `PTTL ${afterExtend} is not remaining + added`)
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      assert.equal(handle.isHeld, true)
      const grown = handle.info.expiresAt - expiresBefore
      assert.ok(grown > 4000 && grown < 5500, `expiresAt grew by ${grown}`)
    } finally {
      await handle.release()
    }
  })

  test('extend keeps the lock alive past its original TTL', async () => {
    const key = 'handle:extend-alive'
    const handle = await lock.acquire(key, 300)
    try {
      await handle.extend(2000)
      await sleep(500)
      assert.equal(handle.isHeld, true)
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      assert.equal(await lockB.tryAcquire(key), null)
    } finally {
      await handle.release()
    }
  })

  test('isHeld: true while held, false after release', async () => {
    const key = 'handle:isHeld-release'
    const handle = await lock.acquire(key)
    assert.equal(handle.isHeld, true)
    assert.equal(handle.info.isHeld, true)
    await handle.release()
    assert.equal(handle.isHeld, false)
    assert.equal(handle.info.isHeld, false)
  })

  test('isHeld turns false once the TTL has passed', async () => {
    const key = 'handle:isHeld-ttl'
    const handle = await lock.acquire(key, 200)
    assert.equal(handle.isHeld, true)
    await sleep(400)
    assert.equal(handle.isHeld, false)
    assert.equal(handle.info.isHeld, false)
    await waitUntilGone(`lock:${key}`)
  })

  test('info has key, token, acquiredAt, expiresAt, isHeld and fence', async () => {
    const key = 'handle:info'
    const ttl = 12000
    const beforeMs = Date.now()
    const handle = await lock.acquire(key, ttl)
    const afterMs = Date.now()
    try {
      const info = handle.info
      assert.deepEqual(Object.keys(info).sort(), ['acquiredAt', 'expiresAt', 'fence', 'isHeld', 'key', 'token'])
      assert.equal(info.key, key)
      assert.equal(info.token, handle.token)
      assert.equal(info.fence, handle.fence)
      assert.equal(info.isHeld, true)
      assert.equal(typeof info.acquiredAt, 'number')
      assert.equal(typeof info.expiresAt, 'number')
      assert.ok(Number.isFinite(info.acquiredAt) && Number.isFinite(info.expiresAt))
      assert.ok(info.acquiredAt >= beforeMs - 5 && info.acquiredAt <= afterMs + 5,
        `acquiredAt ${info.acquiredAt} not within [${beforeMs}, ${afterMs}]`)
      const span = info.expiresAt - info.acquiredAt
      assert.ok(span > ttl - 500 && span <= ttl + 5, `expiresAt - acquiredAt = ${span}, ttl ${ttl}`)
    } finally {
      await handle.release()
    }
  })

  test('info: expiresAt - acquiredAt is the TTL, both counted from the send, however late the reply is taken', async () => {
    const key = 'handle:info-span'
    const ttl = 12000
    const beforeMs = Date.now()
    const acquiring = lock.acquire(key, ttl)
    // The reply waits for this thread: a time read as the handle is made would be late.
    const busyUntil = performance.now() + 40
    while (performance.now() < busyUntil) {}
    const handle = await acquiring
    const afterMs = Date.now()
    try {
      const { acquiredAt, expiresAt } = handle.info
      assert.equal(expiresAt - acquiredAt, ttl)
      assert.ok(acquiredAt >= beforeMs - 1 && acquiredAt <= afterMs, `acquiredAt ${acquiredAt} not within [${beforeMs}, ${afterMs}]`)
      // Sent before the thread was freed: the handle was made 40 ms after.
      assert.ok(afterMs - acquiredAt >= 35, `acquiredAt only ${afterMs - acquiredAt} ms before the handle`)
    } finally {
      await handle.release()
    }
  })

  test('info.expiresAt is never later than the lease\'s end: a contender is granted only after it', async () => {
    for (let i = 0; i < 20; i += 1) {
      const key = `handle:info-end:${i}`
      const held = await lock.acquire(key, 30)
      const { expiresAt } = held.info
      let got = null
      while (!got) got = await lockB.tryAcquire(key, 1000)
      // Date.now() rounds down: the grant came at this or later.
      const grantedBy = Date.now()
      await got.release()
      assert.ok(grantedBy >= expiresAt, `granted ${expiresAt - grantedBy} ms before the holder's expiresAt`)
    }
  })

  test('extend on a released handle rejects with InvalidLockError', async () => {
    const key = 'handle:extend-released'
    const handle = await lock.acquire(key)
    await handle.release()
    await assert.rejects(handle.extend(1000), (err) => assertInvalidLock(err, key))
    assert.equal(await redis.exists(`lock:${key}`), 0, 'extend must not revive the lock')
  })

  test('extend on an expired handle rejects with InvalidLockError and revives nothing', async () => {
    const key = 'handle:extend-expired'
    const handle = await lock.acquire(key, 150)
    await waitUntilGone(`lock:${key}`)
    await assert.rejects(handle.extend(5000), (err) => assertInvalidLock(err, key))
    assert.equal(await redis.exists(`lock:${key}`), 0)
    assert.equal(handle.isHeld, false)
  })

  test('extend on a handle taken over by another holder rejects and leaves the new holder alone', async () => {
    const key = 'handle:extend-taken-over'
    const stale = await lock.acquire(key, 150)
    await waitUntilGone(`lock:${key}`)
    const holder = await lockB.acquire(key, 10000)
    try {
      await assert.rejects(stale.extend(60000), (err) => assertInvalidLock(err, key))
      assert.equal(await redis.get(`lock:${key}`), holder.token)
      const pttl = await redis.pttl(`lock:${key}`)
      assert.ok(pttl > 9000 && pttl <= 10000, `the new holder's PTTL became ${pttl}`)
      assert.equal(holder.isHeld, true)
      assert.equal(stale.isHeld, false)
    } finally {
      await holder.release()
    }
  })

  test('LockHandle cannot be constructed directly', () => {
    assert.throws(() => new LockHandle(), TypeError)
  })
})

describe('token ownership across two instances', () => {
  test('B cannot acquire while A holds', async () => {
    const key = 'owner:exclusion'
    const a = await lock.acquire(key, 10000)
    try {
      assert.equal(await lockB.tryAcquire(key), null)
      await assert.rejects(lockB.acquire(key), (err) => assertAcquisitionError(err, key))
      await assert.rejects(lockB.waitForLock(key, 200), (err) => assertAcquisitionError(err, key))
      assert.equal(await redis.get(`lock:${key}`), a.token)
    } finally {
      await a.release()
    }
    const b = await lockB.acquire(key)
    assert.equal(await redis.get(`lock:${key}`), b.token)
    await b.release()
  })

  test('a stale handle of A releasing does not delete the key B now holds', async () => {
    const key = 'owner:stale-release'
    const a = await lock.acquire(key, 150)
    await waitUntilGone(`lock:${key}`)
    const b = await lockB.acquire(key, 10000)
    try {
      await a.release()
      assert.equal(await redis.get(`lock:${key}`), b.token)
      assert.equal(await lock.isLocked(key), true)
      assert.equal(b.isHeld, true)
      const pttl = await redis.pttl(`lock:${key}`)
      assert.ok(pttl > 9000, `PTTL ${pttl}`)
    } finally {
      await b.release()
    }
    assert.equal(await redis.exists(`lock:${key}`), 0)
  })
})

describe('fencing', () => {
  test('fence is a 15-digit zero-padded decimal string', async () => {
    const key = 'fence:format'
    const handle = await lock.acquire(key)
    try {
      assert.equal(typeof handle.fence, 'string')
      assert.match(handle.fence, /^\d{15}$/)
      assert.ok(Number(handle.fence) >= 1)
      assert.equal(handle.fence, String(Number(handle.fence)).padStart(15, '0'))
    } finally {
      await handle.release()
    }
  })

  test('successive acquisitions across two instances get strictly increasing fences', async () => {
    const key = 'fence:increasing'
    const fences = []
    for (let i = 0; i < 6; i++) {
      const instance = i % 2 === 0 ? lock : lockB
      const handle = i === 3 ? await instance.waitForLock(key, 1000) : await instance.acquire(key)
      fences.push(handle.fence)
      await handle.release()
    }
    for (let i = 1; i < fences.length; i++) {
      assert.ok(Number(fences[i]) > Number(fences[i - 1]), `numbers: ${fences}`)
      assert.ok(fences[i] > fences[i - 1], `strings: ${fences}`)
    }
  })

  test("with keyPrefix '', a lock key is never another lock's fence counter, either way round", async () => {
    const bare = new DistributedLock(backend.url, { keyPrefix: '' })
    const braced = await bare.acquire('{bare}:fence', 10_000)
    const plain = await bare.tryAcquire('bare', 10_000)
    assert.ok(plain, "'bare' must be free while '{bare}:fence' is held")
    assert.ok(Number(plain.fence) >= 1, `fence ${plain.fence}`)
    assert.equal(await redis.get('{bare}:fence'), braced.token, "'{bare}:fence' still holds its own token")
    assert.equal(await bare.fencedSet('bare:data', 'v', plain.fence), true)
    await Promise.all([braced.release(), plain.release()])
    // And once 'bare' was locked, '{bare}:fence' can still be locked.
    const again = await bare.tryAcquire('{bare}:fence', 10_000)
    assert.ok(again, "'{bare}:fence' was blocked by the fence counter of 'bare'")
    await again.release()
  })

  for (const path of ['transaction', 'script']) {
    test(`an acquisition whose fence cannot be drawn fails and leaves no lock (${path})`, async () => {
      const instance = path === 'script' ? new DistributedLock(backend.url, { fair: true }) : lock
      for (const [name, counter] of [['garbage', 'oops'], ['exhausted', '999999999999998'], ['padded', '007']]) {
        const key = `fence:broken-${path}-${name}`
        await redis.set(fenceKey(`lock:${key}`), counter)
        // Twice: the first attempt of the JS thread's connection may still be opening.
        for (let i = 0; i < 2; i++) {
          await assert.rejects(instance.acquire(key, 10_000), (err) => {
            assert.ok(err instanceof LockError, String(err))
            assert.equal(err.code, 'EREDIS')
            assert.match(err.message, /no fencing token can be drawn/)
            return true
          })
          assert.equal(await redis.exists(`lock:${key}`), 0, 'the failed acquisition left a lock behind')
          const after = await redis.get(fenceKey(`lock:${key}`))
          if (path === 'script') assert.equal(after, counter, 'the failed acquisition moved the counter')
          // The transaction's INCRBY runs whatever the counter holds; it stays unusable.
          else assert.ok(after === counter || BigInt(after) > 999999999999997n, `counter ${after}`)
        }
      }
    })
  }

  test('fences keep increasing after a lock expires and is taken by another instance', async () => {
    const key = 'fence:after-expiry'
    const a = await lock.acquire(key, 150)
    await waitUntilGone(`lock:${key}`)
    const b = await lockB.acquire(key)
    try {
      assert.ok(Number(b.fence) > Number(a.fence))
      assert.ok(b.fence > a.fence)
    } finally {
      await b.release()
    }
  })

  test('the fence counter of an untagged key is {lock:<key>}\\xfffence', async () => {
    const key = 'fence:counter-untagged'
    const handle = await lock.acquire(key)
    try {
      const counter = await redis.get(Buffer.from(`{lock:${key}}\xfffence`, 'latin1'))
      assert.notEqual(counter, null, 'fence counter key missing')
      assert.equal(Number(counter), Number(handle.fence) + 1, 'the counter keeps the next fence, for a handover')
      assert.equal(await redis.exists(`lock:${key}:fence`), 0)
    } finally {
      await handle.release()
    }
  })

  test('the fence counter of a hash-tagged key is {<tag>}\\xfffence\\xff<lock key>, never another lock key', async () => {
    const key = '{user}:1'
    const handle = await lock.acquire(key)
    try {
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      const counter = await redis.get(Buffer.from(`{user}\xfffence\xfflock:${key}`, 'latin1'))
      assert.notEqual(counter, null, 'fence counter key missing')
      assert.equal(Number(counter), Number(handle.fence) + 1, 'the counter keeps the next fence, for a handover')
      assert.equal(await redis.exists(`lock:${key}:fence`), 0, 'that is the lock key of "{user}:1:fence"')
    } finally {
      await handle.release()
    }
  })
})

describe('disposal and using', () => {
  test('handle[Symbol.asyncDispose]() releases', async () => {
    const key = 'dispose:handle'
    const handle = await lock.acquire(key)
    assert.equal(typeof handle[Symbol.asyncDispose], 'function')
    await handle[Symbol.asyncDispose]()
    assert.equal(await redis.exists(`lock:${key}`), 0)
    assert.equal(handle.isHeld, false)
  })

  test('using runs fn with the handle, resolves with its result and releases', async () => {
    const key = 'using:result'
    let seen
    const result = await lock.using(key, async (handle) => {
      seen = handle
      assert.ok(handle instanceof LockHandle)
      assert.equal(handle.key, key)
      assert.equal(handle.isHeld, true)
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      return { answer: 42 }
    })
    assert.deepEqual(result, { answer: 42 })
    assert.ok(seen instanceof LockHandle)
    assert.equal(seen.isHeld, false)
    assert.equal(await redis.exists(`lock:${key}`), 0)
  })

  test('using works with a synchronous fn', async () => {
    const key = 'using:sync'
    const result = await lock.using(key, (handle) => handle.key.toUpperCase())
    assert.equal(result, key.toUpperCase())
    assert.equal(await redis.exists(`lock:${key}`), 0)
  })

  test('using releases and rejects with fn\'s own error when fn throws', async () => {
    const key = 'using:throws'
    const boom = new Error('boom')
    let token
    await assert.rejects(
      lock.using(key, async (handle) => {
        token = handle.token
        assert.equal(await redis.get(`lock:${key}`), token)
        throw boom
      }),
      (err) => err === boom,
    )
    assert.ok(token)
    assert.equal(await redis.exists(`lock:${key}`), 0)
  })

  test('using passes ttlMs through', async () => {
    const key = 'using:ttl'
    await lock.using(
      key,
      async () => {
        const pttl = await redis.pttl(`lock:${key}`)
        assert.ok(pttl > 6000 && pttl <= 7000, `PTTL ${pttl}`)
      },
      { ttlMs: 7000 },
    )
    assert.equal(await redis.exists(`lock:${key}`), 0)
  })

  test('using with timeoutMs waits for a held lock', async () => {
    const key = 'using:timeout'
    const holder = await lockB.acquire(key, 20000)
    const timer = setTimeout(() => holder.release(), 300)
    try {
      // Without timeoutMs, acquire's (zero) retries apply.
      await assert.rejects(lock.using(key, () => 'never'), (err) => assertAcquisitionError(err, key))
      let ran = false
      const started = performance.now()
      const result = await lock.using(
        key,
        async (handle) => {
          ran = true
          assert.equal(await redis.get(`lock:${key}`), handle.token)
          return 'done'
        },
        { timeoutMs: 5000 },
      )
      const elapsed = performance.now() - started
      assert.equal(result, 'done')
      assert.equal(ran, true)
      assert.ok(elapsed >= 200, `ran after ${elapsed} ms`)
      assert.ok(elapsed < 4000, `ran only after ${elapsed} ms`)
      assert.equal(await redis.exists(`lock:${key}`), 0)
    } finally {
      clearTimeout(timer)
      await holder.release()
    }
  })

  test('using hands fn a signal that stays unaborted while the lock is held', async () => {
    const key = 'using:signal-held'
    let seen
    const result = await lock.using(key, async (handle, signal) => {
      seen = signal
      assert.ok(signal instanceof AbortSignal)
      await handle.extend(2000)
      await sleep(700) // past the TTL it was acquired with: extended, not lost
      return signal.aborted
    }, { ttlMs: 500 })
    assert.equal(result, false)
    await sleep(600) // past the TTL the lock had: released, not lost
    assert.equal(seen.aborted, false)
  })

  test('using: fn releasing the handle itself is no loss', async () => {
    const key = 'using:signal-released'
    const result = await lock.using(key, async (handle, signal) => {
      await handle.release()
      await sleep(250) // past the TTL
      return signal.aborted
    }, { ttlMs: 100 })
    assert.equal(result, false)
  })

  test('using with autoRefresh: a lost lock aborts the signal and using rejects with the LockLostError', async () => {
    const key = 'using:lost'
    const lost = []
    let reason
    let finished = false
    await assert.rejects(
      lock.using(
        key,
        async (handle, signal) => {
          await redis.del(`lock:${key}`)
          // Real work keeps the event loop alive; on memory:// nothing else would while we wait.
          const busy = setInterval(() => {}, 1000)
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
          clearInterval(busy)
          reason = signal.reason
          finished = true
          return 'finished unprotected'
        },
        { ttlMs: 600, autoRefresh: true, onLost: (err) => lost.push(err) },
      ),
      (err) => {
        assert.equal(err.code, 'ELOST')
        assert.equal(err.key, key)
        assert.equal(err, reason, 'the signal\'s reason')
        return true
      },
    )
    assert.equal(finished, true)
    assert.deepEqual(lost, [reason], 'onLost is told the same error')
  })

  test('using without autoRefresh: the TTL running out aborts the signal and using rejects with ELOST', async () => {
    const key = 'using:expired'
    let abortedAt = null
    const started = performance.now()
    await assert.rejects(
      lock.using(
        key,
        async (_handle, signal) => {
          signal.addEventListener('abort', () => (abortedAt = performance.now()), { once: true })
          await sleep(600)
          return 'too slow'
        },
        { ttlMs: 150 },
      ),
      (err) => {
        assert.equal(err.code, 'ELOST')
        assert.equal(err.key, key)
        return true
      },
    )
    assert.ok(abortedAt !== null, 'aborted while fn ran')
    assert.ok(abortedAt - started >= 140, `aborted after ${Math.round(abortedAt - started)} ms, before the TTL ran out`)
  })

  test("using: fn's own error wins over a loss", async () => {
    const key = 'using:lost-throws'
    const boom = new Error('boom')
    await assert.rejects(
      lock.using(key, async (_handle, signal) => {
        await sleep(300)
        assert.equal(signal.aborted, true)
        throw boom
      }, { ttlMs: 100 }),
      (err) => err === boom,
    )
  })

  test('using with a short timeoutMs rejects without running fn', async () => {
    const key = 'using:timeout-expires'
    const holder = await lockB.acquire(key, 20000)
    try {
      let ran = false
      await assert.rejects(
        lock.using(key, () => { ran = true }, { timeoutMs: 200 }),
        (err) => assertAcquisitionError(err, key),
      )
      assert.equal(ran, false)
      assert.equal(await redis.get(`lock:${key}`), holder.token)
    } finally {
      await holder.release()
    }
  })
})

describe('AbortSignal', () => {
  test('aborting waitForLock rejects with the signal reason soon after abort()', async () => {
    const key = 'abort:wait'
    const holder = await lockB.acquire(key, 20000)
    try {
      const controller = new AbortController()
      const started = performance.now()
      setTimeout(() => controller.abort(), 200)
      await assert.rejects(lock.waitForLock(key, 5000, undefined, { signal: controller.signal }), (err) => {
        assert.equal(err, controller.signal.reason)
        assert.equal(err.name, 'AbortError')
        return true
      })
      const elapsed = performance.now() - started
      assert.ok(elapsed >= 150, `rejected after ${elapsed} ms, before abort()`)
      assert.ok(elapsed < 2000, `rejected only after ${elapsed} ms`)
      assert.equal(await redis.get(`lock:${key}`), holder.token)
    } finally {
      await holder.release()
    }
    assert.equal(await redis.exists(`lock:${key}`), 0, 'the aborted waiter must not hold the lock')
  })

  test('a custom abort reason is passed through', async () => {
    const key = 'abort:custom-reason'
    const holder = await lockB.acquire(key, 20000)
    try {
      const controller = new AbortController()
      const reason = new Error('shutting down')
      setTimeout(() => controller.abort(reason), 100)
      await assert.rejects(lock.waitForLock(key, 5000, undefined, { signal: controller.signal }), (err) => err === reason)
    } finally {
      await holder.release()
    }
  })

  test('an already-aborted signal rejects at once and writes nothing', async () => {
    const key = 'abort:already'
    const before = await redis.dbsize()
    const signal = AbortSignal.abort()
    const started = performance.now()
    await assert.rejects(lock.waitForLock(key, 5000, undefined, { signal }), (err) => {
      assert.equal(err, signal.reason)
      assert.equal(err.name, 'AbortError')
      return true
    })
    await assert.rejects(lock.acquire(key, undefined, { signal }), (err) => err === signal.reason)
    await assert.rejects(lock.using(key, () => assert.fail('fn must not run'), { signal }), (err) => err === signal.reason)
    await assert.rejects(
      lock.using(key, () => assert.fail('fn must not run'), { signal, timeoutMs: 1000 }),
      (err) => err === signal.reason,
    )
    const elapsed = performance.now() - started
    // Far below the waits' own bounds (1000 and 5000 ms), above a loaded machine's stalls.
    assert.ok(elapsed < 500, `took ${elapsed} ms`)
    assert.equal(await redis.exists(`lock:${key}`), 0)
    assert.equal(await redis.exists(fenceKey(`lock:${key}`)), 0, 'the fence counter must not move')
    assert.equal(await redis.dbsize(), before)
  })

  test('aborting acquire while it retries (maxRetries > 0) rejects with the reason', async () => {
    const key = 'abort:acquire'
    const retrying = new DistributedLock(backend.url, { maxRetries: 20, retryDelayMs: 100 })
    const holder = await lockB.acquire(key, 20000)
    try {
      const controller = new AbortController()
      const started = performance.now()
      setTimeout(() => controller.abort(), 250)
      await assert.rejects(retrying.acquire(key, undefined, { signal: controller.signal }), (err) => {
        assert.equal(err, controller.signal.reason)
        assert.equal(err.name, 'AbortError')
        return true
      })
      const elapsed = performance.now() - started
      assert.ok(elapsed >= 200, `rejected after ${elapsed} ms, before abort()`)
      assert.ok(elapsed < 2000, `rejected only after ${elapsed} ms`)
      assert.equal(await redis.get(`lock:${key}`), holder.token)
    } finally {
      await holder.release()
    }
  })

  test('an already-aborted signal makes acquire with retries reject at once', async () => {
    const key = 'abort:acquire-already'
    const retrying = new DistributedLock(backend.url, { maxRetries: 5 })
    const signal = AbortSignal.abort()
    const started = performance.now()
    await assert.rejects(retrying.acquire(key, undefined, { signal }), (err) => err === signal.reason)
    assert.ok(performance.now() - started < 200)
    assert.equal(await redis.exists(`lock:${key}`), 0)
    assert.equal(await redis.exists(fenceKey(`lock:${key}`)), 0)
  })

  test('a signal that never aborts does not get in the way', async () => {
    const key = 'abort:unused'
    const controller = new AbortController()
    const handle = await lock.waitForLock(key, 1000, undefined, { signal: controller.signal })
    try {
      assert.equal(await redis.get(`lock:${key}`), handle.token)
      controller.abort() // after the fact: the handle stays valid
      assert.equal(handle.isHeld, true)
      assert.equal(await redis.get(`lock:${key}`), handle.token)
    } finally {
      await handle.release()
    }
  })
})

describe('binary-safe keys', () => {
  const keys = [
    ['spaces', 'key with  spaces '],
    ['unicode', 'clé 🔒'],
    ['newlines', 'line1\nline2\r\nline3'],
    ['NUL byte', 'before\0after'],
    ['glob characters', '*?[]'],
    ['100 KB', 'x'.repeat(50 * 1024) + 'é🔒'.repeat(10) + 'y'.repeat(50 * 1024)],
  ]
  for (const [name, key] of keys) {
    test(`a key with ${name} is stored byte-exact`, async () => {
      const redisKey = Buffer.from('lock:' + key)
      const handle = await lock.acquire(key, 10000)
      try {
        assert.equal(handle.key, key)
        assert.equal(await redis.exists(redisKey), 1)
        const value = await redis.getBuffer(redisKey)
        assert.ok(value, 'no value at the exact key')
        assert.equal(value.toString(), handle.token)
        // Read before the failed attempt below: a failed attempt may advance the counter too.
        const fence = await redis.getBuffer(Buffer.concat([Buffer.from('{'), redisKey, Buffer.from([0x7d, 0xff]), Buffer.from('fence')]))
        if (!key.includes('{') && !key.includes('}')) {
          assert.ok(fence, 'fence counter not at the exact key')
          assert.equal(Number(fence.toString()), Number(handle.fence) + 1)
        }
        assert.equal(await lock.isLocked(key), true)
        assert.equal(await lockB.tryAcquire(key), null)
      } finally {
        await handle.release()
      }
      assert.equal(await redis.exists(redisKey), 0)
      assert.equal(await lock.isLocked(key), false)
    })
  }

  test('glob characters match nothing but themselves', async () => {
    const other = 'lock:glob-victim'
    await redis.set(other, 'someone', 'PX', 10000)
    try {
      assert.equal(await lock.isLocked('*'), false)
      assert.equal(await lock.isLocked('glob-*'), false)
      const handle = await lock.acquire('glob-*')
      await handle.release()
      assert.equal(await redis.get(other), 'someone')
      assert.equal(await redis.exists('lock:glob-*'), 0)
    } finally {
      await redis.del(other)
    }
  })

  test('keys differing only by Unicode normalization are distinct locks', async () => {
    const composed = 'norm-\u00e9'
    const decomposed = 'norm-e\u0301'
    const a = await lock.acquire(composed)
    try {
      const b = await lock.tryAcquire(decomposed)
      assert.ok(b instanceof LockHandle)
      assert.equal(await redis.get(Buffer.from('lock:' + decomposed)), b.token)
      assert.equal(await redis.get(Buffer.from('lock:' + composed)), a.token)
      await b.release()
    } finally {
      await a.release()
    }
  })
})

describe('module entries', () => {
  function runModule(source) {
    return new Promise((resolve, reject) => {
      execFile(
        process.execPath,
        ['--input-type=module', '-e', source],
        { cwd: path.join(__dirname, '..'), timeout: 15000 },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`${err.message}\n${stderr}`))
          else resolve(stdout)
        },
      )
    })
  }

  test('the ESM entry (self-reference through "exports") exposes the same classes', async () => {
    const source = `
      import { createRequire } from 'node:module'
      import * as main from 'native-redis-lock'
      import { DistributedLock, LockHandle, LockAcquisitionError, InvalidLockError, LockError } from 'native-redis-lock'
      import * as sub from 'native-redis-lock/distributed-lock'
      import * as file from ${JSON.stringify(pathToFileURL(path.join(__dirname, '..', 'index.mjs')).href)}
      import * as subFile from ${JSON.stringify(pathToFileURL(path.join(__dirname, '..', 'distributed-lock.mjs')).href)}
      const require = createRequire(${JSON.stringify(path.join(__dirname, '..', 'index.js'))})
      const cjs = require('native-redis-lock')
      const names = ['DistributedLock', 'LockHandle', 'LockAcquisitionError', 'InvalidLockError', 'LockError']
      const imported = { DistributedLock, LockHandle, LockAcquisitionError, InvalidLockError, LockError }
      const out = {}
      for (const name of names) {
        out[name] = {
          type: typeof imported[name],
          sameAsCjs: imported[name] === cjs[name],
          sameInSubpath: sub[name] === cjs[name],
          sameInFile: file[name] === cjs[name] && subFile[name] === cjs[name],
          defaultHasIt: main.default[name] === cjs[name],
        }
      }
      out.errorChain = new LockAcquisitionError('k', 0) instanceof LockError &&
        new InvalidLockError('k') instanceof LockError
      console.log(JSON.stringify(out))
    `
    const out = JSON.parse(await runModule(source))
    for (const name of ['DistributedLock', 'LockHandle', 'LockAcquisitionError', 'InvalidLockError', 'LockError']) {
      assert.deepEqual(
        out[name],
        { type: 'function', sameAsCjs: true, sameInSubpath: true, sameInFile: true, defaultHasIt: true },
        name,
      )
    }
    assert.equal(out.errorChain, true)
  })

  // Another process: it shares a Redis server, not a memory:// keyspace.
  redisOnly('the ESM entry works against Redis', async () => {
    const key = 'esm:works'
    const source = `
      import { DistributedLock } from 'native-redis-lock'
      const lock = new DistributedLock(${JSON.stringify(backend.url)})
      const handle = await lock.acquire(${JSON.stringify(key)}, 10000)
      console.log(JSON.stringify({ token: handle.token, fence: handle.fence }))
    `
    const out = JSON.parse(await runModule(source))
    assert.match(out.token, UUID_V4)
    assert.match(out.fence, /^\d{15}$/)
    assert.equal(await redis.get(`lock:${key}`), out.token)
    await redis.del(`lock:${key}`)
  })

  test("require('../distributed-lock') exposes the same classes as require('..')", () => {
    const main = require('..')
    const sub = require('../distributed-lock')
    for (const name of ['DistributedLock', 'LockHandle', 'LockAcquisitionError', 'InvalidLockError', 'LockError']) {
      assert.equal(typeof sub[name], 'function', name)
      assert.equal(sub[name], main[name], name)
    }
    assert.equal(require('native-redis-lock/distributed-lock').DistributedLock, main.DistributedLock)
  })

  test('error classes carry their codes and fields when constructed by users', () => {
    const a = new LockAcquisitionError('k', 3)
    assert.equal(a.code, 'ELOCKED')
    assert.equal(a.key, 'k')
    assert.equal(a.retriesAttempted, 3)
    assert.equal(a.name, 'LockAcquisitionError')
    assert.match(a.message, /k/)
    const i = new InvalidLockError('k')
    assert.equal(i.code, 'ENOTHELD')
    assert.equal(i.key, 'k')
    assert.equal(i.name, 'InvalidLockError')
    const e = new LockError('m', 'EREDIS')
    assert.equal(e.code, 'EREDIS')
    assert.equal(e.message, 'm')
  })
})
