'use strict'

// What an autoRefresh hold tells its user: a TTL too short to refresh is refused in ms terms,
// and a lock whose key vanished (a Redis restart, a FLUSHALL, a DEL) is said to be gone, not
// only "taken by another holder". On every backend.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startBackend } = require('./helpers/backend')
const { DistributedLock } = require('..')

let backend
let lock

before(async () => {
  backend = await startBackend()
  lock = new DistributedLock(backend.url)
})

after(async () => {
  await backend?.close()
})

test('autoRefresh with a TTL that is surely seconds (5) is a RangeError naming ttlMs and ms', async () => {
  for (const call of [
    () => lock.acquire('refresh:short', 5, { autoRefresh: true }),
    () => lock.tryAcquire('refresh:short', 99, { autoRefresh: true }),
    () => lock.waitForLock('refresh:short', 100, 30, { autoRefresh: true }),
  ]) {
    const err = await call().catch((e) => e)
    assert.ok(err instanceof RangeError, String(err))
    assert.equal(err.code, 'EINVAL')
    assert.equal(err.argument, 'ttlMs')
    assert.match(err.message, /at least 100 ms with autoRefresh/)
    assert.match(err.message, /milliseconds, not seconds/)
  }
  assert.equal(await lock.isLocked('refresh:short'), false, 'nothing was taken')
  // Without autoRefresh a short TTL is the caller's choice; with it, 100 ms is enough.
  await (await lock.acquire('refresh:short', 5)).release()
  await (await lock.acquire('refresh:short', 100, { autoRefresh: true })).release()
})

test('a short defaultTtlMs with autoRefresh is refused naming options.defaultTtlMs', async () => {
  const short = new DistributedLock(backend.url, { defaultTtlMs: 10 })
  const err = await short.acquire('refresh:default', undefined, { autoRefresh: true }).catch((e) => e)
  assert.equal(err.code, 'EINVAL')
  assert.equal(err.argument, 'options.defaultTtlMs')
})

test('a lock whose key vanished (as in a Redis restart) is reported gone, naming a restart', async () => {
  const handle = await lock.acquire('refresh:gone', 300, { autoRefresh: true })
  const admin = backend.client()
  // A handle keeps no process alive: this test waits on the watchdog's news, so it does.
  const awake = setInterval(() => {}, 1000)
  try {
    await admin.del('lock:refresh:gone')
    const lost = await handle.lost
    assert.equal(lost.code, 'ELOST')
    assert.match(lost.message, /gone/)
    assert.match(lost.message, /Redis restart/)
  } finally {
    clearInterval(awake)
    admin.disconnect()
    await handle.release().catch(() => {})
  }
})
