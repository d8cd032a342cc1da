'use strict'

// Fault suite, scenario 3: Redis restarted empty mid-hold (stop, then start on the same port,
// no persistence). The holder of an autoRefresh DistributedLock handle and of an ExclusiveLock
// must be told within 100 ms of Redis accepting connections again (or earlier, if a deadline
// came first), and the same client must work again (an acquire succeeds) within 150 ms. Both
// are measured from the moment `start()` resolved, i.e. Redis answered PING.
const net = require('node:net')
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../helpers/redis-server')
const { epoch } = require('../fixtures/fault-children')
const { record } = require('./figures')
const { DistributedLock, ExclusiveLock } = require('../..')

const ROUNDS = 3
const TTL_MS = 5000
const TOLD_BOUND_MS = 100
const WORKS_BOUND_MS = 150

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server
let lock
const exclusives = []

before(async () => {
  server = await startRedis()
  lock = new DistributedLock(server.url)
})

after(async () => {
  for (const ex of exclusives) await ex.release().catch(() => {})
  await server?.close()
})

/** The epoch of the first PONG from `port`, probing every 2 ms until `stop()` resolves. */
function firstPong(port) {
  let stopped = false
  const done = (async () => {
    while (!stopped) {
      const at = await new Promise((resolve) => {
        const socket = net.connect(port, '127.0.0.1')
        socket.setTimeout(200)
        socket.once('connect', () => socket.write('PING\r\n'))
        socket.once('data', (data) => {
          const now = epoch()
          socket.destroy()
          resolve(data.toString().startsWith('+PONG') ? now : null)
        })
        socket.once('error', () => resolve(null))
        socket.once('timeout', () => {
          socket.destroy()
          resolve(null)
        })
      })
      if (at !== null) return at
      await sleep(2)
    }
    return null
  })()
  return { at: done, stop: () => (stopped = true) }
}

/** Calls `attempt` until it resolves truthy; the time (epoch) of that and the attempts made. */
async function firstSuccess(attempt, giveUpMs = 3000) {
  const until = epoch() + giveUpMs
  const failures = []
  for (;;) {
    try {
      const value = await attempt()
      if (value) return { at: epoch(), value, attempts: failures.length + 1, failures }
      failures.push('falsy')
    } catch (err) {
      failures.push(err.code ?? err.message)
    }
    if (epoch() > until) throw new Error(`no success within ${giveUpMs} ms: ${failures.join(', ')}`)
    await sleep(5)
  }
}

async function restartRound(round) {
  const key = `restart:${round}`
  let handleToldAt = null
  const handle = await lock.acquire(key, TTL_MS, {
    autoRefresh: true,
    onLost: () => {
      handleToldAt = epoch()
    },
  })
  const ex = new ExclusiveLock({ name: `restart-${round}`, cache_connection: server.url })
  exclusives.push(ex)
  const exErrors = []
  ex.on('error', (err) => exErrors.push({ at: epoch(), err }))
  const exReleased = new Promise((resolve) => ex.once('released', () => resolve(epoch())))
  assert.equal(await ex.acquire(), true)
  await sleep(300) // a few refreshes first

  const stopAt = epoch()
  await server.stop()
  const probe = firstPong(server.port) // when Redis really answers again, to within ~2 ms
  await server.start()
  const upAt = epoch() // start() resolved: the helper saw Redis answer PING
  const pongAt = await probe.at

  // The same DistributedLock takes the same key again: the restart forgot the old hold.
  const again = firstSuccess(() => lock.acquire(key, TTL_MS))
  const handleLost = await Promise.race([handle.lost, sleep(3000).then(() => null)])
  assert.ok(handleLost, 'the autoRefresh handle was never told its lock was lost')
  assert.equal(handleLost.code, 'ELOST')
  const works = await again
  await works.value.release()

  // The ExclusiveLock reports the loss, releases itself, and can be acquired again.
  const releasedAt = await Promise.race([exReleased, sleep(3000).then(() => null)])
  assert.ok(releasedAt, `the ExclusiveLock did not release itself (errors: ${exErrors.map((e) => e.err.message)})`)
  assert.equal(exErrors.length, 1, `ExclusiveLock errors: ${exErrors.map((e) => e.err.message).join('; ')}`)
  assert.equal(exErrors[0].err.code, 'ELOST')
  const exWorks = await firstSuccess(() => ex.acquire())
  await ex.release()

  return {
    downMs: upAt - stopAt,
    startLagMs: upAt - pongAt,
    handleToldAfterPongMs: handleToldAt - pongAt,
    exclusiveToldAfterPongMs: exErrors[0].at - pongAt,
    handleToldMs: handleToldAt - upAt,
    handleReason: handleLost.message,
    worksAgainMs: works.at - upAt,
    worksAgainAttempts: works.attempts,
    worksAgainFailures: works.failures,
    exclusiveToldMs: exErrors[0].at - upAt,
    exclusiveWorksAgainMs: exWorks.at - upAt,
  }
}

test('Redis restarted empty mid-hold: holders told within 100 ms, the client works again within 150 ms', async (t) => {
  const rounds = []
  for (let round = 0; round < ROUNDS; round++) rounds.push(await restartRound(round))
  for (const r of rounds) t.diagnostic(JSON.stringify(r))

  const max = (name) => Number(Math.max(...rounds.map((r) => r[name])).toFixed(2))
  const each = (name) => rounds.map((r) => r[name].toFixed(1)).join(' ')
  const figures = {
    rounds: ROUNDS,
    redisDownMsMax: max('downMs'),
    toldAfterRedisUpMs: max('handleToldMs'),
    toldAfterRedisUpMsEach: each('handleToldMs'),
    toldAfterFirstPongMs: max('handleToldAfterPongMs'),
    exclusiveToldAfterFirstPongMs: max('exclusiveToldAfterPongMs'),
    startResolvedAfterFirstPongMsMax: max('startLagMs'),
    exclusiveToldAfterRedisUpMs: max('exclusiveToldMs'),
    exclusiveToldAfterRedisUpMsEach: each('exclusiveToldMs'),
    worksAgainAfterMs: max('worksAgainMs'),
    worksAgainAfterMsEach: each('worksAgainMs'),
    worksAgainAttemptsMax: max('worksAgainAttempts'),
    exclusiveWorksAgainAfterMs: max('exclusiveWorksAgainMs'),
  }
  t.diagnostic(JSON.stringify(figures))
  record('restart', 'Redis restarted empty mid-hold (autoRefresh handle and ExclusiveLock)', figures)

  for (const r of rounds) {
    // Negative means told before Redis was back (a deadline ran out first): also in time.
    assert.ok(r.handleToldMs < TOLD_BOUND_MS, `handle told ${r.handleToldMs.toFixed(1)} ms after Redis was up`)
    assert.ok(r.exclusiveToldMs < TOLD_BOUND_MS, `ExclusiveLock told ${r.exclusiveToldMs.toFixed(1)} ms after Redis was up`)
    assert.ok(
      r.worksAgainMs < WORKS_BOUND_MS,
      `acquire succeeded ${r.worksAgainMs.toFixed(1)} ms after Redis was up (failures: ${r.worksAgainFailures})`,
    )
    assert.ok(r.exclusiveWorksAgainMs < WORKS_BOUND_MS, `ExclusiveLock acquired again ${r.exclusiveWorksAgainMs.toFixed(1)} ms after Redis was up`)
  }
})
