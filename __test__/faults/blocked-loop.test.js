'use strict'

// Fault suite, scenario 6: a blocked JS event loop. Child processes hold an autoRefresh
// DistributedLock handle and an ExclusiveLock (TTL 1000 ms, default stall budget 3 x TTL) and
// block their JS thread with a synchronous busy loop:
// - for 2 x TTL: the native refresh keeps both locks alive, 3 runs out of 3 (Redis, polled by
//   this process, has them every time, and the holder is told nothing);
// - for 5 x TTL: the locks are given up (they disappear from Redis during the block) and
//   the holder is told within 15 ms of its loop ending.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('../helpers/redis-server')
const { Child, epoch } = require('../fixtures/fault-children')
const { record } = require('./figures')
const { DistributedLock } = require('../..')
const { ownerKey } = require('../helpers/keys')

const TTL_MS = 1000
const RUNS = 3
const TOLD_BOUND_MS = 15

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server
let client
// Both tests' figures, recorded together as one scenario.
const figures = {}
const TITLE = `JS event loop blocked (TTL ${TTL_MS} ms, stall budget 3 x TTL): 2 x TTL survived, 5 x TTL given up`

before(async () => {
  server = await startRedis()
  client = new Redis(server.url)
})

after(async () => {
  Child.killAll()
  client?.disconnect()
  await server?.close()
})

/**
 * Runs one blocked holder. Polls its keys from Redis every ~10 ms until its loop has ended;
 * `onGone(name)` runs once per key the first time it is missing.
 */
async function blockedHolder(name, busyMs, onGone = async () => {}) {
  const keys = { lock: `lock:blocked:${name}`, exclusive: `exclusive-lock:blocked-${name}` }
  keys.owner = ownerKey(keys.exclusive)
  const kid = new Child('fault-blocked.js', [], {
    REDIS_URL: server.url,
    LOCK_KEY: `blocked:${name}`,
    EXCLUSIVE_NAME: `blocked-${name}`,
    TTL_MS: String(TTL_MS),
    BUSY_MS: String(busyMs),
  })
  const held = await kid.waitFor('held')
  assert.equal(held.data.maxStallMs, 3 * TTL_MS)
  const expected = {
    lock: held.data.token,
    exclusive: '1',
    owner: await client.get(keys.owner),
  }
  assert.ok(expected.owner, 'the ExclusiveLock wrote no owner key')
  const names = Object.keys(keys)
  const polls = []
  const gone = {}
  let ended = false
  kid.waitFor('loop-end', busyMs + 15_000).then(
    () => (ended = true),
    () => (ended = true),
  )
  while (!ended) {
    const from = epoch()
    const values = await client.mget(...names.map((n) => keys[n]))
    const poll = { from, to: epoch() }
    names.forEach((n, i) => {
      poll[n] = values[i] === expected[n]
      if (!poll[n] && !gone[n]) gone[n] = { from, value: values[i] }
    })
    polls.push(poll)
    for (const n of names) if (gone[n] && !gone[n].handled) {
      gone[n].handled = true
      await onGone(n)
    }
    await sleep(10)
  }
  const start = await kid.waitFor('loop-start')
  const end = await kid.waitFor('loop-end')
  const afterLoop = await kid.waitFor('after', 5000)
  const exit = await kid.exitWithin(5000)
  assert.ok(exit, 'the holder did not exit after releasing')
  assert.equal(exit.code, 0, `holder exited ${exit.code}/${exit.signal}: ${kid.stderr}`)
  const during = polls.filter((p) => p.from >= start.epoch && p.to <= end.epoch)
  return {
    kid,
    start,
    end,
    afterLoop,
    during,
    gone,
    handleLost: kid.all('handle-lost'),
    exclusiveErrors: kid.all('exclusive-error'),
  }
}

test(`a loop blocked for 2 x TTL (${TTL_MS} ms): both locks survive, ${RUNS} runs of ${RUNS}`, async (t) => {
  const runs = []
  for (let run = 0; run < RUNS; run++) runs.push(await blockedHolder(`short-${run}`, 2 * TTL_MS))
  const survived = runs.filter(
    (r) =>
      r.during.every((p) => p.lock && p.exclusive && p.owner) &&
      r.handleLost.length === 0 &&
      r.exclusiveErrors.length === 0 &&
      r.afterLoop.data.isHeld === true &&
      r.afterLoop.data.acquired === true,
  ).length
  Object.assign(figures, {
    ttlMs: TTL_MS,
    shortBlockMs: 2 * TTL_MS,
    runs: RUNS,
    survived,
    pollsDuringShortBlocks: runs.reduce((sum, r) => sum + r.during.length, 0),
    missedPolls: runs.reduce((sum, r) => sum + r.during.filter((p) => !(p.lock && p.exclusive && p.owner)).length, 0),
  })
  t.diagnostic(JSON.stringify(figures))
  record('blocked-loop', TITLE, figures)

  for (const r of runs) {
    assert.ok(r.end.epoch - r.start.epoch >= 2 * TTL_MS)
    assert.ok(r.during.length >= 50, `only ${r.during.length} polls during the block`)
    assert.deepEqual(r.during.filter((p) => !(p.lock && p.exclusive && p.owner)), [], 'a lock was missing during the block')
    assert.deepEqual(r.end.data, { isHeld: true, acquired: true })
    assert.deepEqual(r.afterLoop.data, { isHeld: true, acquired: true, handleLost: 0, exclusiveErrors: 0 })
  }
  assert.equal(survived, RUNS)
})

test(`a loop blocked for 5 x TTL (> the 3 x TTL stall budget): locks given up during the block, told within ${TOLD_BOUND_MS} ms`, async (t) => {
  // Once the lock is gone from Redis, someone else takes it; the stalled holder must not
  // disturb that hold when it wakes up and releases.
  const contender = new DistributedLock(server.url)
  let taken = null
  const r = await blockedHolder('long', 5 * TTL_MS, async (name) => {
    if (name === 'lock') taken = await contender.tryAcquire('blocked:long', 30_000)
  })
  const blockMs = r.end.epoch - r.start.epoch
  const goneAfter = (name) => (r.gone[name] ? r.gone[name].from - r.start.epoch : null)
  const toldHandle = r.handleLost[0]
  const toldExclusive = r.exclusiveErrors[0]
  Object.assign(figures, {
    ttlMs: TTL_MS,
    longBlockMs: Number(blockMs.toFixed(0)),
    stallBudgetMs: 3 * TTL_MS,
    lockGoneAfterBlockStartMs: goneAfter('lock') === null ? -1 : Number(goneAfter('lock').toFixed(0)),
    exclusiveGoneAfterBlockStartMs: goneAfter('exclusive') === null ? -1 : Number(goneAfter('exclusive').toFixed(0)),
    toldAfterUnblockMs: toldHandle ? Number((toldHandle.epoch - r.end.epoch).toFixed(2)) : -1,
    exclusiveToldAfterUnblockMs: toldExclusive ? Number((toldExclusive.epoch - r.end.epoch).toFixed(2)) : -1,
  })
  t.diagnostic(JSON.stringify(figures))
  record('blocked-loop', TITLE, figures)

  try {
    assert.ok(blockMs >= 5 * TTL_MS)
    for (const name of ['lock', 'exclusive', 'owner']) {
      const at = goneAfter(name)
      assert.ok(at !== null, `${name}: still in Redis through the whole block`)
      assert.ok(r.gone[name].from < r.end.epoch, `${name}: gone only after the block`)
      // Not before the stall budget ran out: refreshes go on until then.
      assert.ok(at >= 3 * TTL_MS - 200, `${name}: gone ${at.toFixed(0)} ms into the block, before the stall budget`)
    }
    assert.ok(taken, 'the contender could not take the given-up lock')
    assert.equal(toldHandle?.data.code, 'ELOST', 'the DistributedLock handle was not told')
    assert.equal(toldExclusive?.data.code, 'ELOST', "the ExclusiveLock emitted no 'error'")
    assert.equal(r.handleLost.length, 1)
    assert.equal(r.exclusiveErrors.length, 1)
    for (const [what, ms] of [['handle', figures.toldAfterUnblockMs], ['ExclusiveLock', figures.exclusiveToldAfterUnblockMs]]) {
      assert.ok(ms >= 0, `${what} told ${ms} ms before its loop ended`)
      assert.ok(ms <= TOLD_BOUND_MS, `${what} told ${ms} ms after its loop ended`)
    }
    assert.equal(r.end.data.isHeld, false, 'isHeld was still true when the loop ended, past the deadline')
    assert.deepEqual(r.afterLoop.data, { isHeld: false, acquired: false, handleLost: 1, exclusiveErrors: 1 })
    // The stalled holder's wake-up and release left the contender's hold alone.
    assert.equal(await client.get('lock:blocked:long'), taken.token)
  } finally {
    await taken?.release()
  }
})
