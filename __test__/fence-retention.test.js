'use strict'

// Fence counters expire (README, "Fencing tokens"): each is kept `fenceRetentionMs`
// (ExclusiveLock: `fence_retention_ms`) past the last lock it numbered, default 7 days, and
// for as long as a hold is refreshed or extended; 0 or Infinity keep it forever. Every API,
// on Redis and on memory:// (NRL_BACKEND=memory).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { DistributedLock } = require('..')
const ExclusiveLock = require('../exclusive-lock')
const DistributedLockService = require('../maestro')
const { startBackend, redisOnly } = require('./helpers/backend')
const { fenceKey } = require('./helpers/keys')

const WEEK = 7 * 24 * 60 * 60 * 1000
const TTL = 5000
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let backend
let redis

before(async () => {
  backend = await startBackend()
  redis = backend.client()
  await redis.connect()
})

after(async () => {
  redis.disconnect()
  await backend.close()
})

/**
 * The counter's TTL is the lock's plus the window, less the time since it was set; a
 * transaction pushes it a quarter window further (so that the next ones need not push it).
 */
async function assertKept(lockKey, retention, ttl) {
  const left = await redis.pttl(fenceKey(lockKey))
  const most = retention + Math.floor(retention / 4) + ttl
  assert.ok(left <= most && left > retention + ttl - 5000, `${lockKey}: counter PTTL ${left}, want ${retention + ttl} to ${most}`)
}

test('DistributedLock: every counter of 200 distinct keys expires a week after its lock, by default', async () => {
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-default:' })
  const keys = Array.from({ length: 200 }, (_, i) => `user:${i}`)
  // acquire (the JS thread's transaction on Redis), tryAcquire and waitForLock (the scripts).
  const handles = await Promise.all(
    keys.map((key, i) => [lock.acquire, lock.tryAcquire, (k, t) => lock.waitForLock(k, 1000, t)][i % 3].call(lock, key, TTL)),
  )
  assert.ok(handles.every(Boolean))
  for (const key of keys) await assertKept(`dl-default:${key}`, WEEK, TTL)
  await Promise.all(handles.map((handle) => handle.release()))
})

test('DistributedLock: fenceRetentionMs sets the window, and fences still increase across holds', async () => {
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-window:', fenceRetentionMs: 60_000 })
  let last = ''
  for (let i = 0; i < 6; i++) {
    const handle = await [lock.acquire, lock.tryAcquire][i % 2].call(lock, 'k', TTL)
    assert.ok(handle.fence > last, `${handle.fence} after ${last}`)
    last = handle.fence
    await assertKept('dl-window:k', 60_000, TTL)
    await handle.release()
  }
  // A fair lock draws its fences in its own script.
  const fair = new DistributedLock(backend.url, { keyPrefix: 'dl-fair:', fair: true, fenceRetentionMs: 60_000 })
  const handle = await fair.acquire('k', TTL)
  await assertKept('dl-fair:k', 60_000, TTL)
  await handle.release()
})

test('DistributedLock: a counter handed over with the lock is kept past the new holder', async () => {
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-handoff:', fenceRetentionMs: 60_000 })
  const first = await lock.acquire('k', 1000)
  const waiting = lock.waitForLock('k', 10_000, 30_000)
  await sleep(50)
  await first.release()
  const second = await waiting
  assert.ok(second.fence > first.fence)
  // At least the window past the new holder's lock; the waiter's own failed attempt may
  // have asked for as much already (and a quarter window more), and the handover keeps the
  // counter's margin.
  const left = await redis.pttl(fenceKey('dl-handoff:k'))
  assert.ok(left > 60_000 + 30_000 - 5000 && left <= 75_000 + 2 * 30_000, `counter PTTL ${left}`)
  await second.release()
})

test('DistributedLock: a hold refreshed or extended past the window keeps its counter', async () => {
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-long:', fenceRetentionMs: 1000 })
  const handle = await lock.acquire('k', 600, { autoRefresh: true })
  // Three times the window plus the TTL: without refreshes the counter would be gone.
  await sleep(3 * 1000 + 600)
  const left = await redis.pttl(fenceKey('dl-long:k'))
  assert.ok(left > 1000 - 600, `counter PTTL ${left} after a long hold`)
  await handle.extend(20_000)
  const extended = await redis.pttl(fenceKey('dl-long:k'))
  assert.ok(extended > 20_000, `counter PTTL ${extended} after extend`)
  await handle.release()
  const next = await lock.acquire('k', 600)
  assert.ok(next.fence > handle.fence, `${next.fence} after ${handle.fence}`)
  await next.release()
})

test('0 and Infinity keep counters forever, on every API', async () => {
  for (const forever of [0, Infinity]) {
    const lock = new DistributedLock(backend.url, { keyPrefix: `dl-forever-${forever}:`, fenceRetentionMs: forever })
    const handle = await lock.acquire('k', TTL)
    assert.equal(await redis.pttl(fenceKey(`dl-forever-${forever}:k`)), -1)
    await handle.release()

    const exclusive = new ExclusiveLock({ name: `forever-${forever}`, cache_connection: backend.url, fence_retention_ms: forever })
    assert.equal(await exclusive.acquire(), true)
    assert.equal(await redis.pttl(fenceKey(`exclusive-lock:forever-${forever}`)), -1)
    await exclusive.release()

    const service = new DistributedLockService(`svc-forever-${forever}`, TTL, backend.url, { fenceRetentionMs: forever })
    assert.equal(await service.acquire(), true)
    assert.equal(await redis.pttl(fenceKey(`svc-forever-${forever}`)), -1)
    await service.release()
  }
  // Instances of one name that differ only in the window keep their own: the default one made
  // first must not lend its window to one that keeps counters forever (JSON writes Infinity
  // as it writes the default's undefined).
  const windowed = new ExclusiveLock({ name: 'forever-shared', cache_connection: backend.url })
  assert.equal(await windowed.acquire(), true)
  await windowed.release()
  await redis.persist(fenceKey('exclusive-lock:forever-shared'))
  const forever = new ExclusiveLock({ name: 'forever-shared', cache_connection: backend.url, fence_retention_ms: Infinity })
  assert.equal(await forever.acquire(), true)
  assert.equal(await redis.pttl(fenceKey('exclusive-lock:forever-shared')), -1)
  await forever.release()
})

test('ExclusiveLock: every counter of 100 names expires after its lock, the window its fence_retention_ms', async () => {
  const locks = Array.from({ length: 100 }, (_, i) => new ExclusiveLock({ name: `job-${i}`, cache_connection: backend.url, lock_ttl_ms: TTL, lock_refresh_ms: 2000 }))
  assert.ok((await Promise.all(locks.map((lock) => lock.acquire()))).every(Boolean))
  for (let i = 0; i < locks.length; i++) await assertKept(`exclusive-lock:job-${i}`, WEEK, TTL)
  await Promise.all(locks.map((lock) => lock.release()))

  const short = new ExclusiveLock({ name: 'short', cache_connection: backend.url, lock_ttl_ms: 600, lock_refresh_ms: 100, fence_retention_ms: 1000 })
  assert.equal(await short.acquire(), true)
  const fence = short.fence
  await assertKept('exclusive-lock:short', 1000, 600)
  // Refreshed past the window: the counter stays beside the lock.
  await sleep(3 * 1000 + 600)
  const left = await redis.pttl(fenceKey('exclusive-lock:short'))
  assert.ok(left > 1000 - 600, `counter PTTL ${left} after a long hold`)
  await short.release()
  assert.equal(await short.acquire(), true)
  assert.ok(short.fence > fence, `${short.fence} after ${fence}`)
  await short.release()
})

test('DistributedLockService: its counter expires after its lock, the window its options.fenceRetentionMs', async () => {
  const keys = Array.from({ length: 50 }, (_, i) => `svc:${i}`)
  const services = keys.map((key) => new DistributedLockService(key, TTL, backend.url))
  assert.ok((await Promise.all(services.map((service) => service.acquire()))).every(Boolean))
  for (const key of keys) await assertKept(key, WEEK, TTL)
  await Promise.all(services.map((service) => service.release()))

  const service = new DistributedLockService('svc-window', TTL, backend.url, { fenceRetentionMs: 60_000 })
  assert.equal(await service.acquire(), true)
  await assertKept('svc-window', 60_000, TTL)
  await service.release()
})

test('a bad fence retention is an EINVAL naming the option, before any Redis call', () => {
  for (const bad of [-1, 1.5, NaN, -Infinity, 1e20]) {
    assert.throws(
      () => new DistributedLock(backend.url, { fenceRetentionMs: bad }),
      (err) => err.code === 'EINVAL' && err.argument === 'options.fenceRetentionMs' && err instanceof RangeError,
      String(bad),
    )
    assert.throws(
      () => new DistributedLockService('k', 1000, backend.url, { fenceRetentionMs: bad }),
      (err) => err.code === 'EINVAL' && err.argument === 'options.fenceRetentionMs' && err instanceof RangeError,
      String(bad),
    )
  }
  for (const bad of [-1, 1.5, -Infinity, 1e20]) {
    assert.throws(
      () => new ExclusiveLock({ name: 'bad', cache_connection: backend.url, fence_retention_ms: bad }),
      (err) => err.code === 'EINVAL' && err.argument === 'fence_retention_ms' && /fence_retention_ms/.test(err.message),
      String(bad),
    )
  }
  for (const bad of ['1000', null]) {
    assert.throws(() => new DistributedLock(backend.url, { fenceRetentionMs: bad }), (err) => err.code === 'EINVAL' && err.argument === 'options.fenceRetentionMs')
    assert.throws(() => new DistributedLockService('k', 1000, backend.url, { fenceRetentionMs: bad }), (err) => err.code === 'EINVAL' && err.argument === 'options.fenceRetentionMs')
    assert.throws(() => new ExclusiveLock({ name: 'bad', cache_connection: backend.url, fence_retention_ms: bad }), (err) => err.code === 'EINVAL')
  }
})

redisOnly('a transaction leaves alone a counter its connection knows kept, until a quarter window is used up', async () => {
  const pexpires = async () => Number(/cmdstat_pexpire:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0)
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-known:', fenceRetentionMs: 60_000 })
  const exclusive = new ExclusiveLock({ name: 'known', cache_connection: backend.url, lock_ttl_ms: TTL, lock_refresh_ms: 2000, fence_retention_ms: 60_000 })
  await (await lock.acquire('k', TTL)).release()
  assert.equal(await exclusive.acquire(), true)
  await exclusive.release()
  const pushed = await pexpires()
  let fence = ''
  for (let i = 0; i < 5; i++) {
    const handle = await lock.acquire('k', TTL)
    assert.ok(handle.fence > fence)
    fence = handle.fence
    await handle.release()
    await assertKept('dl-known:k', 60_000, TTL)
    assert.equal(await exclusive.acquire(), true)
    await exclusive.release()
    await assertKept('exclusive-lock:known', 60_000, TTL)
  }
  assert.equal(await pexpires(), pushed, 'a counter known kept was pushed again')
  // A lock longer than the quarter window allows for: pushed, by both commands.
  const long = await lock.acquire('k', TTL + 20_000)
  assert.equal(await pexpires(), pushed + 2)
  await assertKept('dl-known:k', 60_000, TTL + 20_000)
  await long.release()
})

redisOnly('attempts written as the script (a contended lock) neither read nor push a counter their connection knows kept', async () => {
  const pttls = async () => Number(/cmdstat_pttl:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0)
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-script-known:', fenceRetentionMs: 60_000 })
  // Found held once: the attempts at it go as the script for a while (ops/kept_fences.rs).
  const first = await lock.acquire('k', TTL)
  await assert.rejects(lock.acquire('k', TTL), (err) => err.code === 'ELOCKED')
  await first.release()
  const before = await pttls()
  let fence = first.fence
  const rounds = 10
  for (let i = 0; i < rounds; i++) {
    const handle = await lock.acquire('k', TTL)
    assert.ok(handle.fence > fence)
    fence = handle.fence
    await handle.release()
  }
  // One script may run its upkeep (on the runtime's connection, or before anything is known).
  assert.ok((await pttls()) - before <= 1, `the scripts read the counter ${(await pttls()) - before} times in ${rounds} acquisitions`)
  await assertKept('dl-script-known:k', 60_000, TTL)
})

redisOnly('a won script leaves its counter an eighth of a window past what its lock needs (what the next scripts count on)', async () => {
  const window = 60_000
  // A connection of its own (its options differ from the other tests'): its first call goes on
  // the runtime's connection while its JS-thread socket opens, as the script.
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-eighth:', fenceRetentionMs: window, connectTimeoutMs: 4_321 })
  // A counter that outlives the coming lock by the window, but by less than an eighth more.
  await redis.set(fenceKey('dl-eighth:k'), '100', 'PX', TTL + window + window / 16)
  // A transaction's push would pass this test on any build, so the form is checked too.
  const calls = async (name) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(await redis.info('commandstats'))?.[1] ?? 0)
  const [scripts, transactions] = [await calls('evalsha'), await calls('multi')]
  const handle = await lock.tryAcquire('k', TTL)
  assert.ok(handle, 'not acquired')
  assert.equal(await calls('multi'), transactions, 'the attempt went as a transaction, not the script')
  assert.ok((await calls('evalsha')) > scripts, 'no script ran')
  assert.ok(BigInt(handle.fence) > 100n, `fence ${handle.fence} not drawn from the counter`)
  const left = await redis.pttl(fenceKey('dl-eighth:k'))
  assert.ok(left > TTL + window + window / 8, `counter PTTL ${left}, want over ${TTL + window + window / 8}`)
  await handle.release()
})

redisOnly('a user whose ACL refuses PERSIST gets an error and no lock with fenceRetentionMs: 0, and locks as usual with a window', async () => {
  const commands = ['evalsha', 'script|load', 'exists', 'get', 'set', 'del', 'pexpire', 'pexpireat', 'pexpiretime', 'pttl', 'incr', 'incrby', 'time', 'multi', 'exec']
  await redis.call('ACL', 'SETUSER', 'nopersist', 'on', '>nopersist-pw', '~acl:*', '~{acl:*', ...commands.map((c) => `+${c}`))
  const url = `redis://nopersist:nopersist-pw@127.0.0.1:${backend.server.port}`
  const forever = new DistributedLock(url, { keyPrefix: 'acl:', fenceRetentionMs: 0 })
  // The JS thread's transaction, then the script.
  await assert.rejects(forever.acquire('k', TTL))
  await assert.rejects(forever.tryAcquire('k', TTL))
  assert.equal(await redis.exists('acl:k'), 0, 'no lock may be left behind')
  const windowed = new DistributedLock(url, { keyPrefix: 'acl:', fenceRetentionMs: 60_000 })
  const handle = await windowed.acquire('k', TTL)
  await assertKept('acl:k', 60_000, TTL)
  await handle.release()
})

/**
 * `n` holds of `key` (`prefix` before it in Redis) on `lock`, each handed over by the one
 * before and kept `holdMs`: the waiters queue behind the first, which is released after
 * `queued()` ran. Answers each hold's fence and, as it began, its counter's and its lock's
 * PTTL.
 */
async function handedChain(lock, prefix, ttl, { n, holdMs = 0, queued = async () => {} }) {
  const first = await lock.acquire('k', ttl)
  const handedBefore = lock.stats().handedOver
  const holds = []
  const waiters = Array.from({ length: n }, () =>
    lock.waitForLock('k', 30_000, ttl).then(async (handle) => {
      const [counterLeft, lockLeft] = await Promise.all([redis.pttl(fenceKey(`${prefix}k`)), redis.pttl(`${prefix}k`)])
      holds.push({ fence: handle.fence, counterLeft, lockLeft })
      await sleep(holdMs)
      await handle.release()
    }),
  )
  await sleep(50)
  await queued()
  await first.release()
  await Promise.all(waiters)
  assert.equal(lock.stats().handedOver - handedBefore, n, 'every hold was handed over')
  const fences = holds.map((h) => h.fence)
  assert.deepEqual(fences, [...fences].sort(), 'fences increase along the chain')
  assert.ok(fences[0] > first.fence)
  return holds
}

redisOnly('hand-overs along a chain of holds read and push no fence counter while it is known kept (default window)', async () => {
  const stats = async () => {
    const info = await redis.info('commandstats')
    const calls = (name) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
    return { pttl: calls('pttl'), pexpire: calls('pexpire') }
  }
  // Waiters that poll no more often than the first holder's TTL: none within the chain.
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-chain:', retryDelayMs: 10_000 })
  let before
  const holds = await handedChain(lock, 'dl-chain:', TTL, {
    n: 8,
    queued: async () => {
      before = await stats()
    },
  })
  const after = await stats()
  // Only the test's own reads: two PTTLs per hold.
  assert.deepEqual(after, { pttl: before.pttl + 2 * holds.length, pexpire: before.pexpire })
  for (const { counterLeft, lockLeft } of holds) {
    assert.ok(counterLeft >= lockLeft + WEEK, `counter PTTL ${counterLeft}, lock PTTL ${lockLeft}`)
  }
})

test('a counter handed over along a chain outlives every lock it numbered by a window just above the TTL', async () => {
  const ttl = 1000
  const window = 1200
  const lock = new DistributedLock(backend.url, { keyPrefix: 'dl-chain-short:', fenceRetentionMs: window, retryDelayMs: 10_000 })
  // Long enough in all that the counter's expiry as the first hold left it passes meanwhile.
  const holds = await handedChain(lock, 'dl-chain-short:', ttl, { n: 6, holdMs: 500 })
  for (const { counterLeft, lockLeft } of holds) {
    assert.ok(counterLeft >= lockLeft + window - 50, `counter PTTL ${counterLeft}, lock PTTL ${lockLeft}, window ${window}`)
  }
})
