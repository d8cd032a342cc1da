'use strict'

// Making a lock sets nothing up that its settings already have: the connection of an address
// in use (and a DistributedLock's native side, which keeps no state of its own) is made once
// and handed to every ExclusiveLock, DistributedLockService and DistributedLock made with the
// same settings, so code that makes one object per job pays for no connection per job.
// Runs on a private redis-server, or on memory:// with NRL_BACKEND=memory.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startBackend } = require('./helpers/backend')

// Counts what the JS layer asks the addon to make, before the classes load the addon.
const native = require('../lib/native')
const made = { NativeConnection: 0, NativeDistributedLock: 0, NativeExclusiveLock: 0, NativeLockService: 0 }
for (const name of Object.keys(made)) {
  const Original = native[name]
  if (typeof Original !== 'function') continue
  native[name] = class extends Original {
    constructor(...args) {
      super(...args)
      made[name]++
    }
  }
}
const ExclusiveLock = require('../exclusive-lock')
const DistributedLockService = require('../maestro')
const { DistributedLock } = require('..')

let backend
before(async () => {
  backend = await startBackend()
})
after(async () => {
  if (backend) await backend.close()
})

const counted = () => ({ ...made })
const since = (start) => Object.fromEntries(Object.keys(made).map((name) => [name, made[name] - start[name]]))

test('one connection per address for every API, however many objects are made on it', async () => {
  const start = counted()
  const objects = []
  for (let i = 0; i < 50; i++) {
    objects.push(new ExclusiveLock({ name: `job ${i % 5}`, cache_connection: backend.url }))
    objects.push(new DistributedLockService(`job:${i % 5}`, 3000, backend.url))
    objects.push(new DistributedLock(backend.url))
    objects.push(new DistributedLock(backend.url, { keyPrefix: 'other:' }))
  }
  const counts = since(start)
  assert.equal(counts.NativeConnection, 1, 'the connection was set up again for an address in use')
  assert.equal(counts.NativeExclusiveLock, 5, 'one native ExclusiveLock per name (and settings)')
  assert.equal(counts.NativeLockService, 1, 'one native DistributedLockService per set of settings')
  assert.equal(counts.NativeDistributedLock, 2, 'one native DistributedLock per set of options')

  // They work, and on one connection.
  const lock = objects[0]
  assert.equal(await lock.acquire(), true)
  const handle = await objects[2].acquire('shared-connection:a', 1000)
  assert.equal(await objects[3].isLocked('shared-connection:a'), false, 'the other prefix is another lock')
  assert.equal(await objects[2].isLocked('shared-connection:a'), true)
  await handle.release()
  await lock.release()
})

test('crossProcessGrants: false is the default: the shared connection, not one of its own', () => {
  new DistributedLock(backend.url)
  const start = counted()
  new DistributedLock(backend.url, { crossProcessGrants: false })
  new DistributedLockService('job:grants-off', 3000, backend.url, { crossProcessGrants: false })
  new ExclusiveLock({ name: 'job grants-off', cache_connection: backend.url, cross_process_grants: false })
  assert.equal(since(start).NativeConnection, 0)
})

test('other settings are another connection, and settings are read anew each time', async () => {
  const options = { connectTimeoutMs: 1000 }
  const first = new DistributedLock(backend.url, options)
  const start = counted()
  const same = new DistributedLock(backend.url, options)
  assert.deepEqual(since(start), { NativeConnection: 0, NativeDistributedLock: 0, NativeExclusiveLock: 0, NativeLockService: 0 })
  // The same object, changed: read again, not remembered by identity.
  options.connectTimeoutMs = 2000
  const changed = new DistributedLock(backend.url, options)
  assert.equal(since(start).NativeConnection, 1, 'a changed connect timeout reused the old connection')
  assert.equal(since(start).NativeDistributedLock, 1)
  const handle = await changed.acquire('shared-connection:b', 1000)
  assert.equal(await first.isLocked('shared-connection:b'), true)
  assert.equal(await same.isLocked('shared-connection:b'), true)
  await handle.release()
})

test('ExclusiveLocks sharing their native side keep their holds apart', async () => {
  const start = counted()
  const settings = { name: 'shared-connection:holds', cache_connection: backend.url, lock_ttl_ms: 1200, lock_refresh_ms: 200 }
  const first = new ExclusiveLock(settings)
  const second = new ExclusiveLock(settings)
  assert.equal(since(start).NativeExclusiveLock, 1)
  let firstRefreshed = 0
  let secondRefreshed = 0
  first.on('refreshed', () => firstRefreshed++)
  second.on('refreshed', () => secondRefreshed++)
  assert.equal(await first.acquire(), true)
  assert.equal(await second.acquire(), false, 'the second instance took a lock the first holds')
  assert.equal(second.fence, null)
  assert.equal(second.refresh_timer, null)
  assert.match(first.fence, /^\d{15}$/)
  // Releasing the instance that does not hold leaves the hold alone.
  await second.release()
  assert.equal((await first.inspect())?.lock_contents, '1', 'the release of the other instance deleted the lock')
  assert.equal(first.acquired, true)
  // Three of the holder's refreshes (200 ms apart), however late load makes them: as long
  // as news of them had to reach the second instance. A bound, not a sleep.
  const deadline = performance.now() + 5000
  while (firstRefreshed < 3 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.ok(firstRefreshed >= 3, `the holder heard ${firstRefreshed} refreshes in 5 s`)
  assert.equal(secondRefreshed, 0, 'news of the first hold reached the second instance')
  const fence = first.fence
  await first.release()
  assert.equal(first.fence, null)
  assert.equal(await first.inspect(), null)
  // Now the second wins, with a hold of its own.
  assert.equal(await second.acquire(), true)
  assert.notEqual(second.fence, fence)
  assert.equal(first.fence, null)
  await second.release()
})

test('DistributedLockServices sharing their native side keep their holds and waits apart', async () => {
  const start = counted()
  const first = new DistributedLockService('shared-connection:service', 3000, backend.url)
  const second = new DistributedLockService('shared-connection:service', 3000, backend.url)
  const other = new DistributedLockService('shared-connection:service-other', 3000, backend.url)
  // One at most: those of the tests before may have been collected.
  assert.ok(since(start).NativeLockService <= 1, 'a service was made anew for settings in use')
  assert.equal(await first.acquire(3000, 0), true)
  // The second waits for the key the first holds; releasing the second ends only its wait.
  const waiting = second.acquire(3000, 2000)
  await new Promise((resolve) => setTimeout(resolve, 50))
  assert.equal(await other.acquire(3000, 0), true, 'another key of the same native side')
  assert.equal(await second.release(), true)
  assert.equal(await waiting, false, 'the cancelled wait won')
  assert.equal(first.isLocked, true)
  assert.equal(other.isLocked, true)
  // Releasing the one holds leaves the other's alone.
  assert.equal(await other.release(), true)
  assert.equal(first.isLocked, true)
  assert.equal(await second.acquire(3000, 0), false, 'the first hold was released with the other one')
  assert.equal(await first.release(), true)
  assert.equal(await second.acquire(3000, 0), true)
  assert.notEqual(second.lockValue, first.lockValue)
  assert.equal(await second.release(), true)
})
