'use strict'

// Fault suite, scenario 2: a paused holder. A child process holds a DistributedLock with
// autoRefresh (TTL 500 ms) and is SIGSTOPped for 2 x TTL; meanwhile the test takes the lock
// and writes the resource with its newer fence. Continued, the old holder writes with its old
// fence several times, checking isHeld before each write:
// - every one of those stale writes is rejected by fencedSet;
// - isHeld is false for every write begun after the holder's local deadline;
// - the holder is told (onLost / handle.lost) right after it resumes: the target is 5 ms, the
//   asserted safety bound 100 ms, and the measured figure is recorded.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('../helpers/redis-server')
const { Child, epoch } = require('../fixtures/fault-children')
const { record } = require('./figures')
const { DistributedLock } = require('../..')

const TTL_MS = 500
const WRITES = 5
const ROUNDS = 3
const TOLD_TARGET_MS = 5
const TOLD_BOUND_MS = 100

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server
let client
let lock

before(async () => {
  server = await startRedis()
  client = new Redis(server.url)
  lock = new DistributedLock(server.url, { retryDelayMs: 10 })
})

after(async () => {
  Child.killAll()
  client?.disconnect()
  await server?.close()
})

/** One pause of one holder; returns what was measured. */
async function pauseRound(round) {
  const keys = { LOCK_KEY: `paused:${round}`, RESOURCE_KEY: `paused:${round}:resource` }
  const holder = new Child('fault-paused-holder.js', [], {
    REDIS_URL: server.url,
    TTL_MS: String(TTL_MS),
    WRITES: String(WRITES),
    ...keys,
  })
  const held = await holder.waitFor('held')
  assert.equal(held.data.firstWrite, true, 'the holder could not write while it held the lock')
  await sleep(400) // a couple of refreshes first (every TTL/3)
  assert.equal(await client.get(`lock:${keys.LOCK_KEY}`), held.data.token, 'the holder lost its lock before the pause')

  const stoppedAt = epoch()
  holder.signal('SIGSTOP')
  const contender = await lock.waitForLock(keys.LOCK_KEY, 3 * TTL_MS, 10_000)
  const contenderAt = epoch()
  let contenderWrote
  try {
    assert.ok(contender.fence > held.data.fence, `contender fence ${contender.fence} <= holder's ${held.data.fence}`)
    contenderWrote = await lock.fencedSet(keys.RESOURCE_KEY, 'contender', contender.fence)
    assert.equal(contenderWrote, true, "the contender's write with the newer fence was rejected")
    while (epoch() < stoppedAt + 2 * TTL_MS) await sleep(Math.max(1, stoppedAt + 2 * TTL_MS - epoch()))

    const resumedAt = epoch() // measured right before SIGCONT
    holder.signal('SIGCONT')
    const told = await holder.waitFor('lost', 5000)
    const writes = (await holder.waitFor('writes', 10_000)).data
    const exit = await holder.exitWithin(5000)
    assert.ok(exit, 'the holder did not exit')
    assert.equal(exit.code, 0, `holder exited ${exit.code}/${exit.signal}: ${holder.stderr}`)

    // The resource still holds the contender's write: nothing stale got through.
    assert.deepEqual(await client.hgetall(keys.RESOURCE_KEY), { value: 'contender', fence: contender.fence })
    const promise = holder.all('lost').find((l) => l.data.via === 'promise')
    assert.equal(told.data.via, 'onLost')
    assert.equal(told.data.code, 'ELOST')
    assert.equal(told.data.name, 'LockLostError')
    assert.ok(promise, 'handle.lost did not resolve')
    return {
      stoppedForMs: resumedAt - stoppedAt,
      contenderAfterStopMs: contenderAt - stoppedAt,
      toldAfterResumeMs: told.epoch - resumedAt,
      lostPromiseAfterResumeMs: promise.epoch - resumedAt,
      writes: writes.writes,
    }
  } finally {
    await contender.release()
  }
}

test(`a holder SIGSTOPped for 2 x TTL (${TTL_MS} ms): stale writes rejected, isHeld false, told on resume`, async (t) => {
  const rounds = []
  for (let round = 0; round < ROUNDS; round++) rounds.push(await pauseRound(round))

  const writes = rounds.flatMap((r) => r.writes)
  const rejected = writes.filter((w) => w.ok === false).length
  const afterDeadline = writes.filter((w) => w.begun >= w.expiresAt)
  const toldMs = rounds.map((r) => r.toldAfterResumeMs)
  const figures = {
    rounds: ROUNDS,
    ttlMs: TTL_MS,
    pausedMsMin: Number(Math.min(...rounds.map((r) => r.stoppedForMs)).toFixed(1)),
    staleWrites: writes.length,
    staleWritesRejected: rejected,
    staleWritesRejectedPercent: (100 * rejected) / writes.length,
    writesAfterLocalDeadline: afterDeadline.length,
    isHeldFalseAfterDeadline: afterDeadline.filter((w) => w.held === false).length,
    toldAfterResumeMsMax: Number(Math.max(...toldMs).toFixed(2)),
    toldAfterResumeMsMin: Number(Math.min(...toldMs).toFixed(2)),
    toldAfterResumeMsEach: toldMs.map((ms) => ms.toFixed(2)).join(' '),
    toldWithinTargetMs: TOLD_TARGET_MS,
    roundsToldWithinTarget: toldMs.filter((ms) => ms <= TOLD_TARGET_MS).length,
  }
  t.diagnostic(JSON.stringify(figures))
  record('paused-holder', `holder SIGSTOPped for 2 x TTL (TTL ${TTL_MS} ms) while a contender takes the lock`, figures)

  for (const r of rounds) {
    assert.ok(r.stoppedForMs >= 2 * TTL_MS, `paused only ${r.stoppedForMs} ms`)
    assert.ok(r.contenderAfterStopMs < r.stoppedForMs, 'the contender got the lock only after the holder resumed')
  }
  assert.equal(writes.length, ROUNDS * WRITES)
  assert.equal(rejected, writes.length, `${writes.length - rejected} stale write(s) got through fencedSet`)
  // Every late write began after the local deadline (the pause outlasted the TTL) ...
  assert.equal(afterDeadline.length, writes.length, 'a late write began before the local deadline')
  // ... and for each of them isHeld said false.
  assert.deepEqual(afterDeadline.filter((w) => w.held !== false), [], 'isHeld was true after the local deadline')
  for (const ms of toldMs) {
    assert.ok(ms > -1, `told ${ms} ms before it was resumed`)
    assert.ok(ms < TOLD_BOUND_MS, `told ${ms.toFixed(1)} ms after resuming (target ${TOLD_TARGET_MS} ms)`)
  }
})
