'use strict'

// A rejection's stack shows the caller's own frames (V8's async stack traces), though the
// error is made as the native call settles, when no caller is on the stack. On every backend.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { startBackend } = require('./helpers/backend')
const { DistributedLock, ExclusiveLock } = require('..')
const DistributedLockService = require('../maestro')

let backend
let holder // a second lock on the same store, holding what the callers below want

before(async () => {
  backend = await startBackend()
  holder = new DistributedLock(backend.alias)
})

after(async () => {
  await backend?.close()
})

/** Asserts that `err` is one of ours and that its stack names `caller`. */
function assertCaller(err, caller) {
  assert.ok(err instanceof Error, `expected an error, got ${err}`)
  assert.ok(typeof err.code === 'string', `expected a coded error, got ${err.stack}`)
  assert.ok(err.stack.includes(`async ${caller} `), `${caller} is not in the stack:\n${err.stack}`)
}

test('DistributedLock: acquire (with and without options), waitForLock and extend keep the caller in the stack', async () => {
  const held = await holder.acquire('stacks:dl', 10000)
  const lock = new DistributedLock(backend.url, { maxRetries: 0 })
  try {
    async function callerOfAcquire() {
      return await lock.acquire('stacks:dl', 10000)
    }
    assertCaller(await callerOfAcquire().catch((err) => err), 'callerOfAcquire')

    async function callerOfWaitForLock() {
      return await lock.waitForLock('stacks:dl', 50, 10000)
    }
    const waited = await callerOfWaitForLock().catch((err) => err)
    assertCaller(waited, 'callerOfWaitForLock')

    async function callerOfAcquireWithOptions() {
      return await lock.acquire('stacks:dl', 10000, { autoRefresh: true })
    }
    assertCaller(await callerOfAcquireWithOptions().catch((err) => err), 'callerOfAcquireWithOptions')

    // A lock that expired under its handle: extend fails in Redis, not before.
    const short = await lock.acquire('stacks:short', 50)
    await new Promise((resolve) => setTimeout(resolve, 120))
    await holder.acquire('stacks:short', 10000)
    async function callerOfExtend() {
      return await short.extend(1000)
    }
    assertCaller(await callerOfExtend().catch((err) => err), 'callerOfExtend')
  } finally {
    await held.release()
  }
})

test('waitForLock that times out says within how many ms, not after how many retries', async () => {
  const held = await holder.acquire('stacks:wait', 10000)
  const lock = new DistributedLock(backend.url)
  try {
    for (const options of [undefined, { autoRefresh: true }]) {
      const err = await lock.waitForLock('stacks:wait', 120, 10000, options).catch((e) => e)
      assert.equal(err.code, 'ELOCKED')
      assert.equal(err.message, 'Failed to acquire lock "stacks:wait" within 120 ms')
      assert.ok(err.stack.startsWith(`LockAcquisitionError: ${err.message}\n`), err.stack)
    }
  } finally {
    await held.release()
  }
})

/** A URL where nothing listens: every call fails with ECONNECTION, quickly. */
async function closedPort() {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return `redis://127.0.0.1:${port}`
}

test('every call that fails to reach Redis keeps the caller in the stack', async () => {
  const url = await closedPort()
  const lock = new DistributedLock(url, { commandTimeoutMs: 500 })
  const calls = {
    async callerOfTryAcquire() {
      return await lock.tryAcquire('k', 1000)
    },
    async callerOfIsLocked() {
      return await lock.isLocked('k')
    },
    async callerOfFencedSet() {
      return await lock.fencedSet('k', 'v', '000000000000001')
    },
    async callerOfExclusiveAcquire() {
      const exclusive = new ExclusiveLock({ name: 'stacks', cache_connection: url })
      return await exclusive.acquire()
    },
    async callerOfExclusiveInspect() {
      const exclusive = new ExclusiveLock({ name: 'stacks', cache_connection: url })
      return await exclusive.inspect()
    },
  }
  for (const [name, call] of Object.entries(calls)) {
    const err = await call().catch((e) => e)
    assert.ok(err?.code === 'ECONNECTION' || err?.code === 'ETIMEDOUT', `${name}: ${err?.stack ?? err}`)
    assertCaller(err, name)
  }
})

test('DistributedLockService logs a failed acquisition with the caller in its stack', async () => {
  const url = await closedPort()
  const logged = []
  const logger = { error: (_message, err) => logged.push(err), warn() {}, debug() {}, info() {} }
  const service = new DistributedLockService('stacks', 1000, url, { logger })
  async function callerOfServiceAcquire() {
    return await service.acquire()
  }
  assert.equal(await callerOfServiceAcquire(), false)
  assert.ok(logged.length > 0, 'nothing logged')
  assertCaller(logged[0], 'callerOfServiceAcquire')
})
