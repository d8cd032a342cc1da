'use strict'

// DistributedLock handles with `autoRefresh`: the native watchdog keeps them alive, and the
// handle reports what it last confirmed (isHeld, info.expiresAt), releases and extends with
// that, and tells of a loss once.
// Runs on a private redis-server, or on the embedded memory:// backend with NRL_BACKEND=memory
// (`npm test` runs both; see helpers/backend.js).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startBackend, redisOnly } = require('./helpers/backend')
const { startProxy } = require('./helpers/tcp-proxy')
const { DistributedLock, LockLostError } = require('..')
const native = require('../binding.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let backend
let redis
let lock

before(async () => {
  backend = await startBackend()
  redis = backend.client()
  lock = new DistributedLock(backend.url)
})

after(async () => {
  redis?.disconnect()
  await backend?.close()
})

test('held past 3 x TTL: isHeld stays true and expiresAt follows the refreshes', async () => {
  const handle = await lock.acquire('auto:held', 300, { autoRefresh: true })
  const first = handle.info.expiresAt
  await sleep(900)
  assert.equal(handle.isHeld, true)
  assert.ok(handle.info.expiresAt > first + 300, `expiresAt ${handle.info.expiresAt - first} ms later`)
  const token = await redis.get('lock:auto:held')
  assert.equal(handle.token, token)
  assert.equal(handle.info.token, token)
  const pttl = await redis.pttl('lock:auto:held')
  assert.ok(pttl > 0 && pttl <= 300, `PTTL ${pttl}`)
  await handle.release()
  assert.equal(handle.isHeld, false)
  assert.equal(await redis.exists('lock:auto:held'), 0)
  // The watchdog kept the token while it watched; the handle keeps it once released.
  assert.equal(handle.token, token)
})

// A slow link to a server: a TCP proxy in front of Redis.
redisOnly('released after 3 x TTL over a slow link: the key is deleted, not left to expire', async () => {
  // The handle's own deadline is its acquisition's; the release must be bounded by the
  // watchdog's, or it gives up (as on a lock already expired) before Redis can answer.
  const proxy = await startProxy(backend.server.port)
  try {
    proxy.setDelay(40)
    const slow = new DistributedLock(proxy.url)
    const handle = await slow.acquire('auto:slow', 300, { autoRefresh: true })
    await sleep(1000)
    assert.equal(handle.isHeld, true)
    await handle.release()
    assert.equal(await redis.exists('lock:auto:slow'), 0, 'release left the key behind')
  } finally {
    await proxy.close()
  }
})

test('extend on an autoRefresh handle: Redis has the longer TTL until the next refresh', async () => {
  const handle = await lock.acquire('auto:extend', 3000, { autoRefresh: true })
  try {
    await handle.extend(5000)
    // Refreshes run every TTL / 3 (1 s): read before the next one sets the TTL back.
    const pttl = await redis.pttl('lock:auto:extend')
    assert.ok(pttl > 7000, `PTTL ${pttl}`)
    assert.equal(handle.isHeld, true)
  } finally {
    await handle.release()
  }
  assert.equal(await redis.exists('lock:auto:extend'), 0)
})

test('a lock deleted under its holder: lost resolves, onLost is called once, isHeld is false', async () => {
  const told = []
  const handle = await lock.acquire('auto:lost', 300, { autoRefresh: true, onLost: (err) => told.push(err) })
  await sleep(150)
  const before = handle.info.expiresAt
  const token = handle.token
  assert.match(token, /^[0-9a-f-]{36}$/)
  await redis.del('lock:auto:lost')
  const err = await Promise.race([handle.lost, sleep(1000).then(() => null)])
  assert.ok(err instanceof LockLostError, `lost resolved with ${err}`)
  assert.equal(err.code, 'ELOST')
  assert.equal(err.key, 'auto:lost')
  await sleep(400)
  assert.equal(told.length, 1)
  assert.equal(told[0], err)
  assert.equal(handle.isHeld, false)
  // What was last confirmed, not the acquisition's: at least as late as before the loss.
  assert.ok(handle.info.expiresAt >= before, 'expiresAt went back')
  // Read after the loss, the promise is already settled with the same error.
  assert.equal(await handle.lost, err)
  // The loss brought the token along: the handle still knows it.
  assert.equal(handle.token, token)
  await handle.release()
})

test('a release stops the refreshes; a handle without autoRefresh never had any', async () => {
  const url = backend.url
  const watched = () => native.watchdogStats({ url }).watched
  const plain = await lock.acquire('auto:plain', 1000)
  const auto = await lock.acquire('auto:stop', 1000, { autoRefresh: true })
  assert.equal(watched(), 1)
  assert.equal(await Promise.race([plain.lost, sleep(10).then(() => 'pending')]), 'pending')
  await auto.release()
  assert.equal(watched(), 0)
  await plain.release()
  const refreshes = native.watchdogStats({ url }).refreshes
  await sleep(500)
  assert.equal(native.watchdogStats({ url }).refreshes, refreshes)
})

test('tryAcquire with autoRefresh on a held key answers null and watches nothing', async () => {
  const holder = await lock.acquire('auto:busy', 1000)
  assert.equal(await lock.tryAcquire('auto:busy', 1000, { autoRefresh: true }), null)
  assert.equal(native.watchdogStats({ url: backend.url }).watched, 0)
  await holder.release()
})

test('news for a listener that is gone never reaches the one that took its place', () => {
  const { listen, unlisten, dispatch } = require('../lib/completions')
  const told = []
  const first = listen((event) => told.push(['first', event]))
  unlisten(first)
  const second = listen((event) => told.push(['second', event]))
  assert.notEqual(second, first)
  // A loss of the first, still on its way when its slot was reused:
  dispatch(first, 'lost', 'ELOST', 'gone')
  assert.deepEqual(told, [])
  dispatch(second, 'lost', 'ELOST', 'gone')
  assert.deepEqual(told, [['second', 'lost']])
  unlisten(second)
  unlisten(second)
  dispatch(second, 'lost', 'ELOST', 'gone')
  assert.equal(told.length, 1)
})

test('what waits on a plain handle\'s `lost` goes with the handle (no promise shared by all of them)', async () => {
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  // Handles made, waited on and released here, so that nothing of this test keeps them.
  const waitOnLost = async (key) => {
    const handle = await lock.acquire(key, 1000)
    const onLost = () => {}
    handle.lost.then(onLost)
    await handle.release()
    return { lost: new WeakRef(handle.lost), onLost: new WeakRef(onLost) }
  }
  const refs = [await waitOnLost('auto:plain-lost:1'), await waitOnLost('auto:plain-lost:2')]
  assert.notEqual(refs[0].lost.deref(), refs[1].lost.deref())
  const kept = () => refs.filter((ref) => ref.onLost.deref() !== undefined).length
  for (let i = 0; i < 20 && kept() > 0; i += 1) {
    await sleep(10)
    gc()
  }
  assert.equal(kept(), 0)
})
