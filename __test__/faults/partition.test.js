'use strict'

// Fault suite, scenario 4: a network partition. A TCP proxy between our client and Redis
// black-holes all traffic (partition()) for 2 x TTL (TTL 1 s); a contender talks to Redis
// directly. Requirements:
// - the holder of an autoRefresh handle is told at its local deadline (last confirmed
//   refresh's send time + TTL), before the contender can acquire: no double hold;
// - every call made during the partition settles within its bound: handle.extend and
//   handle.release within the lock's remaining validity + 50 ms (commandTimeoutMs is 5000, so
//   the validity is what bounds them), waitForLock(key, 300) within 300 + 50 ms, acquire
//   within commandTimeoutMs + 50 ms;
// - no unhandled rejection;
// - after heal(), the first acquire on the same DistributedLock succeeds within 500 ms.
//
// The bounds are the library's own timers; a promise settles on the JS thread a little after
// its timer fires, so the settle times, observed from JS, get JS_SLACK_MS on top. The exact
// overshoot over each bound is recorded.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('../helpers/redis-server')
const { startProxy } = require('../helpers/tcp-proxy')
const { epoch } = require('../fixtures/fault-children')
const { record } = require('./figures')
const { DistributedLock, LockError } = require('../..')

const TTL_MS = 1000
const PARTITION_MS = 2 * TTL_MS
const COMMAND_TIMEOUT_MS = 5000
const SHORT_COMMAND_TIMEOUT_MS = 1000 // for the acquire, so its own bound falls in the partition
const GRACE_MS = 50
const JS_SLACK_MS = 40
const TOLD_LAG_BOUND_MS = 50
const HEALED_ACQUIRE_BOUND_MS = 500
const CONTENDER_TTL_MS = 10_000

const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server
let proxy
let client

before(async () => {
  server = await startRedis()
  proxy = await startProxy(server.port)
  client = new Redis(server.url)
})

after(async () => {
  proxy?.heal()
  await proxy?.close()
  client?.disconnect()
  await server?.close()
})

/** Starts `call()` now; resolves with how and when it settled. */
function timed(call) {
  const startedAt = epoch()
  return call().then(
    (value) => ({ ok: true, value, startedAt, ms: epoch() - startedAt }),
    (err) => ({ ok: false, err, startedAt, ms: epoch() - startedAt }),
  )
}

test('a partition of 2 x TTL: told at the deadline before the contender wins, every call bounded, works after heal', async (t) => {
  const lock = new DistributedLock(proxy.url, { commandTimeoutMs: COMMAND_TIMEOUT_MS })
  const shortLock = new DistributedLock(proxy.url, { commandTimeoutMs: SHORT_COMMAND_TIMEOUT_MS })
  const direct = new DistributedLock(server.url, { retryDelayMs: 10 })

  let toldAt = null
  const lostErrors = []
  const held = await lock.acquire('part:held', TTL_MS, {
    autoRefresh: true,
    onLost: (err) => {
      toldAt ??= epoch()
      lostErrors.push(err)
    },
  })
  await sleep(500) // a few refreshes (every TTL/3) before the partition
  assert.equal(held.isHeld, true)
  const toExtend = await lock.acquire('part:extend', TTL_MS)
  const toRelease = await lock.acquire('part:release', TTL_MS)
  // Warm the direct connection, so the contender's first attempt is not a connect.
  assert.equal(await direct.isLocked('part:held'), true)

  proxy.partition()
  const partitionedAt = epoch()

  // The contender, straight to Redis: it wins the moment the holder's key expires.
  let holderHeldWhenContenderWon = null
  let toldWhenContenderWon = null
  const contender = direct.waitForLock('part:held', 5000, CONTENDER_TTL_MS).then((handle) => {
    holderHeldWhenContenderWon = held.isHeld
    toldWhenContenderWon = toldAt !== null
    return { handle, at: epoch() }
  })
  // When Redis granted it, by Redis's own clock (ms; the same host's wall clock): PX counts
  // from the SET, so the grant is PEXPIRETIME - PX, to within the millisecond.
  const grantedAt = contender.then(async ({ handle }) => {
    const expireAt = await client.pexpiretime(`lock:${handle.key}`)
    return expireAt - CONTENDER_TTL_MS
  })

  // Calls through the partitioned proxy, all at once.
  const extendValidity = toExtend.info.expiresAt - epoch()
  const releaseValidity = toRelease.info.expiresAt - epoch()
  const calls = {
    extend: timed(() => toExtend.extend(TTL_MS)),
    release: timed(() => toRelease.release()),
    waitForLock: timed(() => lock.waitForLock('part:free', 300, TTL_MS)),
    acquire: timed(() => shortLock.acquire('part:free-2', TTL_MS)),
  }
  const bounds = {
    extend: extendValidity + GRACE_MS,
    release: releaseValidity + GRACE_MS,
    waitForLock: 300 + GRACE_MS,
    acquire: SHORT_COMMAND_TIMEOUT_MS + GRACE_MS,
  }
  const outcomes = {}
  for (const [name, promise] of Object.entries(calls)) outcomes[name] = await promise
  const won = await contender
  const wonAt = await grantedAt
  const heldExpiresAt = held.info.expiresAt // the local deadline: last confirmed refresh + TTL

  // Hold the partition for 2 x TTL in all, then let the contender go and heal.
  while (epoch() < partitionedAt + PARTITION_MS) await sleep(Math.max(1, partitionedAt + PARTITION_MS - epoch()))
  await won.handle.release()
  proxy.heal()
  const healedAt = epoch()
  const healed = await timed(() => lock.acquire('part:held', TTL_MS))
  if (healed.ok) await healed.value.release()
  await held.release() // harmless: the lock is long gone
  await sleep(100) // let any late rejection surface

  const figures = {
    ttlMs: TTL_MS,
    partitionMs: Number((healedAt - partitionedAt).toFixed(1)),
    toldAfterPartitionMs: Number((toldAt - partitionedAt).toFixed(1)),
    toldAfterLocalDeadlineMs: Number((toldAt - heldExpiresAt).toFixed(2)),
    contenderAcquiredAfterPartitionMs: Number((won.at - partitionedAt).toFixed(1)),
    contenderGrantedAfterLocalDeadlineMs: wonAt - heldExpiresAt,
    contenderGrantedAfterToldMs: Number((wonAt - toldAt).toFixed(2)),
    contenderResolvedAfterToldMs: Number((won.at - toldAt).toFixed(2)),
    doubleHoldMs: Math.max(0, Number((toldAt - (wonAt + 1)).toFixed(2))),
    unhandledRejections: unhandled.length,
    healedAcquireMs: Number(healed.ms.toFixed(1)),
  }
  for (const name of Object.keys(calls)) {
    figures[`${name}SettledMs`] = Number(outcomes[name].ms.toFixed(1))
    figures[`${name}BoundMs`] = Number(bounds[name].toFixed(1))
    figures[`${name}OverBoundMs`] = Number((outcomes[name].ms - bounds[name]).toFixed(2))
    figures[`${name}Outcome`] = outcomes[name].ok ? 'resolved' : outcomes[name].err.code
  }
  t.diagnostic(JSON.stringify(figures))
  record('partition', `TCP partition of 2 x TTL (TTL ${TTL_MS} ms) between client and Redis`, figures)

  // Told, once, at the local deadline, and before the contender could take the lock.
  assert.ok(toldAt !== null, 'the holder was never told its lock was lost')
  assert.equal(lostErrors.length, 1)
  assert.equal(lostErrors[0].code, 'ELOST')
  // The local deadline keeps a margin for clock drift and scheduling (1 % of TTL + 2 ms, see
  // clock::validity): the holder is told that much before Redis could expire the lock.
  const margin = TTL_MS / 100 + 2
  assert.ok(toldAt >= heldExpiresAt - margin - 1, `told ${heldExpiresAt - toldAt} ms before the deadline`)
  assert.ok(toldAt - heldExpiresAt < TOLD_LAG_BOUND_MS, `told ${(toldAt - heldExpiresAt).toFixed(1)} ms after the local deadline`)
  assert.equal(toldWhenContenderWon, true, 'the contender held the lock before the holder was told')
  assert.equal(holderHeldWhenContenderWon, false, 'the holder still reported isHeld when the contender won')
  assert.equal(
    figures.doubleHoldMs,
    0,
    `the holder was told ${(toldAt - heldExpiresAt).toFixed(2)} ms after its local deadline, but Redis granted the ` +
      `contender ${wonAt - heldExpiresAt} ms after it (ms clock): a double hold of at least ${figures.doubleHoldMs} ms`,
  )
  assert.ok(won.at - partitionedAt < PARTITION_MS, 'the contender only got the lock after the partition')

  // Every call settled within its bound, none resolved as if Redis had answered.
  for (const name of Object.keys(calls)) {
    const outcome = outcomes[name]
    assert.ok(
      outcome.ms <= bounds[name] + JS_SLACK_MS,
      `${name} settled after ${outcome.ms.toFixed(1)} ms, bound ${bounds[name].toFixed(1)} ms (+${JS_SLACK_MS} ms JS slack)`,
    )
    assert.ok(outcome.startedAt + outcome.ms < partitionedAt + PARTITION_MS, `${name} settled only after the heal`)
  }
  for (const name of ['extend', 'waitForLock', 'acquire']) {
    const { ok, err } = outcomes[name]
    assert.equal(ok, false, `${name} resolved during the partition`)
    assert.ok(err instanceof LockError, `${name}: ${err?.name}: ${err?.message}`)
    assert.ok(['ETIMEDOUT', 'ECONNECTION'].includes(err.code), `${name}: ${err.code} ${err.message}`)
  }
  // A release that could not reach Redis before the lock ran out resolves: the lock is gone.
  assert.equal(outcomes.release.ok, true, `release: ${outcomes.release.err?.code} ${outcomes.release.err?.message}`)
  assert.equal(toRelease.isHeld, false)

  assert.deepEqual(unhandled, [], 'unhandled rejections')
  assert.equal(healed.ok, true, `the first acquire after heal failed: ${healed.err?.code} ${healed.err?.message}`)
  assert.ok(healed.ms < HEALED_ACQUIRE_BOUND_MS, `the first acquire after heal took ${healed.ms.toFixed(1)} ms`)
})
