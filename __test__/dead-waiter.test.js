'use strict'

// A waiting process that died must not swallow the wake, on the default path (no
// `crossProcessGrants`): a release skips a queued connection nobody hears any more (README
// "Waiting"). Waiters here poll only every 30 s (maestro's default step), so only the wake
// explains a prompt hold.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { startChild, killAll, line } = require('./helpers/child')
const { siblingKey } = require('./helpers/keys')
const { DistributedLock } = require('..')
const DistributedLockService = require('../maestro')
const syncguard = require('../syncguard')

const WORKER = path.join(__dirname, 'fixtures', 'wake-worker.js')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const now = () => performance.timeOrigin + performance.now()
// A few ms on a quiet machine (the diagnostics print it), far more on a loaded 2-core CI
// runner; far below the 30 s poll either way.
const BOUND_MS = 500

let server
let client
const children = new Set()

before(async () => {
  server = await startRedis()
  client = new Redis(server.url)
})

after(async () => {
  killAll(children)
  client?.disconnect()
  await server?.close()
})

/** The lock's wake queue: connections with waiters, first queued first (see enqueue.lua). */
const queueOf = (lockKey) => client.zrange(siblingKey(lockKey, 'waiting'), 0, -1)

async function queued(lockKey, length, timeoutMs = 5000) {
  const until = Date.now() + timeoutMs
  while ((await queueOf(lockKey)).length !== length) {
    if (Date.now() > until) throw new Error(`the queue of ${lockKey} never had ${length} entries`)
    await sleep(5)
  }
}

/** Three waiting processes, each queued before the next starts: queue order. */
async function lineUp(lockKey, env) {
  const kids = []
  for (let i = 0; i < 3; i++) {
    const kid = startChild(WORKER, { REDIS_URL: server.url, TTL_MS: '10000', HOLD_MS: '20', ...env }, children)
    await kid.ready
    await queued(lockKey, i + 1)
    kids.push(kid)
  }
  return kids
}

async function killed(kid) {
  const exited = kid.exited
  process.kill(kid.proc.pid, 'SIGKILL')
  await exited
  // Redis reads the closed socket within a millisecond on loopback.
  await sleep(20)
}

/** Kills the first queued process, releases, and checks the second holds at once. */
async function killFirstThenRelease(t, lockKey, kids, release) {
  const [first, second, third] = kids
  // Each queued under its marked name: its own wake channel is what the release checks.
  assert.ok((await queueOf(lockKey)).every((member) => member.endsWith('!')), String(await queueOf(lockKey)))
  await killed(first)
  const released = now()
  await release()
  const { held } = await line(second, 'held')
  const after = held - released
  t.diagnostic(`next live waiter held ${after.toFixed(2)} ms after the release`)
  assert.ok(after < BOUND_MS, `held ${after} ms after the release`)
  // Its release wakes the third in turn.
  const { held: thirdHeld } = await line(third, 'held')
  assert.ok(thirdHeld !== null)
  assert.deepEqual(await Promise.all([second.exited, third.exited]), [0, 0])
  assert.deepEqual(await queueOf(lockKey), [])
}

test('DistributedLock.waitForLock: a queued waiter SIGKILLed, then the release: the next live waiter holds within 500 ms', async (t) => {
  const lock = new DistributedLock(server.url)
  const handle = await lock.acquire('dead:dl', 30_000)
  const kids = await lineUp('lock:dead:dl', { MODE: 'wait', LOCK_KEY: 'dead:dl' })
  await sleep(100)
  await killFirstThenRelease(t, 'lock:dead:dl', kids, () => handle.release())
  await lock.disconnect?.()
})

test("maestro's DistributedLockService (30 s step): a queued waiter SIGKILLed, then the release: the next holds within 500 ms", async (t) => {
  const lockKey = 'dead:maestro'
  const holder = new DistributedLockService(lockKey, 30_000, server.url)
  assert.equal(await holder.acquire(30_000, 0), true)
  const kids = await lineUp(lockKey, { MODE: 'service', LOCK_KEY: lockKey })
  // Every waiter is past its first attempt: its next is due only after a backoff step.
  await sleep(200)
  await killFirstThenRelease(t, lockKey, kids, async () => assert.equal(await holder.release(), true))
})

test("syncguard's lock(fn) (retrying every 30 s): a queued waiter SIGKILLed, then the release: the next holds within 500 ms", async (t) => {
  const key = 'dead-sg'
  const backend = syncguard.createRedisBackend(server.url)
  const held = await backend.acquire({ key, ttlMs: 30_000 })
  assert.equal(held.ok, true)
  const kids = await lineUp(`syncguard:${key}`, { MODE: 'syncguard', LOCK_KEY: key })
  await sleep(100)
  await killFirstThenRelease(t, `syncguard:${key}`, kids, async () => assert.equal((await backend.release({ lockId: held.lockId })).ok, true))
})
