'use strict'

// Retries and backoff of `acquire`, and the polling of `waitForLock`, observed where it counts:
// on the Redis server, through MONITOR, with the server's own timestamps.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { lateness } = require('./helpers/lateness')
const { DistributedLock, LockError, LockAcquisitionError } = require('..')

const PREFIX = 'lock:'
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** MONITOR's timestamp ("seconds.microseconds") in ms, without float rounding surprises. */
function serverMs(time) {
  const [sec, usec = '0'] = String(time).split('.')
  return Number(sec) * 1000 + Number(usec.padEnd(6, '0')) / 1000
}

let server
let client
let monitor
const events = []
let syncCounter = 0

/** Resolves once MONITOR has shown every command Redis executed before this call. */
async function syncMonitor() {
  const marker = `monitor-sync-${process.pid}-${++syncCounter}`
  await client.echo(marker)
  const deadline = Date.now() + 5000
  while (!events.some((e) => e.args[0].toLowerCase() === 'echo' && e.args[1] === marker)) {
    if (Date.now() > deadline) throw new Error('MONITOR did not deliver the sync marker')
    await sleep(5)
  }
}

/**
 * Acquire attempts on `key` seen by the server, oldest first, one per attempt: every attempt
 * carries a fresh token, so a NOSCRIPT-answered EVALSHA that the client re-sends after
 * SCRIPT LOAD counts once, at the time of its last (answered) send. `exclude`: holders' tokens.
 */
function attemptsOn(key, exclude = []) {
  const byToken = new Map()
  for (const { ms, args, source } of events) {
    const command = args[0].toLowerCase()
    let token
    if (command === 'evalsha' && args[3] === PREFIX + key && args[4]?.endsWith('fence')) {
      // acquire: EVALSHA sha 2 <lock key> <fence key> <token> <ttl> ...; a waiter's adds its
      // queue key: EVALSHA sha 3 <lock key> <fence key> <queue key> <token> ...
      token = args[3 + Number(args[2])]
    } else if (command === 'set' && source !== 'lua' && args[1] === PREFIX + key && args[3] === 'NX') {
      // a first attempt sent as MULTI / SET <lock key> <token> NX PX <ttl> / INCRBY / EXEC
      token = args[2]
    } else continue
    if (exclude.includes(token)) continue
    byToken.set(token, ms)
  }
  return [...byToken.values()].sort((a, b) => a - b)
}

function gaps(times) {
  return times.slice(1).map((t, i) => t - times[i])
}

function assertAcquisitionError(err, key) {
  assert.ok(err instanceof LockAcquisitionError, `expected LockAcquisitionError, got ${err?.name}: ${err?.message}`)
  assert.ok(err instanceof LockError)
  assert.equal(err.code, 'ELOCKED')
  assert.equal(err.key, key)
  return true
}

before(async () => {
  server = await startRedis()
  client = new Redis(server.url)
  // Load the scripts once so the measured calls do not pay for NOSCRIPT + SCRIPT LOAD.
  const warm = new DistributedLock(server.url)
  const h = await warm.acquire('retries:warm', 5000)
  await h.extend(1000)
  await h.release()
  monitor = await client.monitor()
  monitor.on('monitor', (time, args, source) =>
    events.push({ ms: serverMs(time), args: args.map(String), source: String(source) }),
  )
})

after(async () => {
  monitor?.disconnect()
  client?.disconnect()
  await server?.close()
})

describe('acquire: retries with exponential backoff', () => {
  test('maxRetries 3 makes exactly 4 attempts, 100 / 200 / 400 ms apart on the server', async () => {
    const key = 'retries:backoff'
    const holder = new DistributedLock(server.url)
    const contender = new DistributedLock(server.url, { maxRetries: 3, retryDelayMs: 100 })
    const held = await holder.acquire(key, 10_000)
    try {
      const started = performance.now()
      const stop = lateness()
      await assert.rejects(contender.acquire(key, 5000), (err) => {
        assertAcquisitionError(err, key)
        assert.equal(err.retriesAttempted, 3)
        return true
      })
      const elapsed = performance.now() - started
      // What load took from this process meanwhile: a gap may run that much later.
      const late = stop()
      await syncMonitor()
      const attempts = attemptsOn(key, [held.token])
      assert.equal(attempts.length, 4, `expected 4 attempts, saw ${attempts.length}`)
      const nominal = [100, 200, 400]
      gaps(attempts).forEach((gap, i) => {
        assert.ok(gap >= nominal[i] - 5, `gap ${i + 1} was ${gap.toFixed(1)} ms, expected >= ${nominal[i] - 5}`)
        const most = nominal[i] + 80 + late
        assert.ok(gap <= most, `gap ${i + 1} was ${gap.toFixed(1)} ms, expected <= ${most.toFixed(1)} (${late.toFixed(1)} late)`)
      })
      assert.ok(elapsed >= 695, `rejected after ${elapsed.toFixed(0)} ms, before the 700 ms of backoff`)
      assert.equal(await holder.isLocked(key), true, 'the holder still holds the key')
    } finally {
      await held.release()
    }
  })

  test('the default (maxRetries 0) makes exactly one attempt', async () => {
    const key = 'retries:default'
    const holder = new DistributedLock(server.url)
    const contender = new DistributedLock(server.url)
    const held = await holder.acquire(key, 10_000)
    try {
      const started = performance.now()
      await assert.rejects(contender.acquire(key), (err) => {
        assertAcquisitionError(err, key)
        assert.equal(err.retriesAttempted, 0)
        return true
      })
      assert.ok(performance.now() - started < 1000, 'no backoff without retries')
      // Give a stray retry (100 ms default delay) time to show up before counting.
      await sleep(350)
      await syncMonitor()
      assert.equal(attemptsOn(key, [held.token]).length, 1)
    } finally {
      await held.release()
    }
  })

  /**
   * A contender retrying after 1000, 2000, 4000 ms while the holder releases at ~1500 ms: it has
   * attempted at ~0 and ~1000 ms, and must hold the lock right after the release, before its
   * third attempt at ~3000 ms. Each step is 500 ms or more from the next, so a loaded machine
   * neither moves the second attempt past the release nor the wake past the third attempt
   * (which timers make only later, never sooner).
   * Runs `check(held, won)` while the contender holds it.
   */
  async function releaseDuringBackoff(key, holderOptions, check) {
    const holder = new DistributedLock(server.url, holderOptions)
    const contender = new DistributedLock(server.url, { maxRetries: 3, retryDelayMs: 1000 })
    const held = await holder.acquire(key, 10_000)
    const releasing = sleep(1500).then(() => held.release())
    const started = performance.now()
    const won = await contender.acquire(key, 5000)
    const elapsed = performance.now() - started
    await releasing
    try {
      assert.equal(won.isHeld, true)
      assert.ok(won.fence > held.fence, `fence ${won.fence} should follow ${held.fence}`)
      assert.ok(elapsed >= 1495, `acquired after ${elapsed.toFixed(0)} ms, before the release`)
      assert.ok(elapsed < 2800, `acquired after ${elapsed.toFixed(0)} ms: the backoff, not the release, woke it`)
      await syncMonitor()
      await check(held, won)
    } finally {
      await won.release()
    }
  }

  test('a release by another connection during the backoff wakes the contender at once', async () => {
    const key = 'retries:win-on-retry'
    // Other settings, so another connection: as another process releasing. The wake makes
    // the contender try at once, a third attempt.
    await releaseDuringBackoff(key, { connectTimeoutMs: 4999 }, (held) => {
      assert.equal(attemptsOn(key, [held.token]).length, 3)
    })
  })

  test('a release on the same connection hands the lock to the retrying contender', async () => {
    const key = 'retries:handed'
    await releaseDuringBackoff(key, {}, async (held, won) => {
      assert.equal(await client.get(PREFIX + key), won.token)
      // Two attempts only: the release script itself made the contender the holder.
      assert.equal(attemptsOn(key, [held.token, won.token]).length, 2)
      const handedIn = (e) => e.source === 'lua' && e.args[0].toLowerCase() === 'set' && e.args[2] === won.token
      assert.equal(events.filter(handedIn).length, 1, 'the lock was not handed over in the release script')
    })
  })
})

describe('waitForLock: polling until the deadline', () => {
  test('times out with LockAcquisitionError after the timeout, with retriesAttempted > 0', async () => {
    const key = 'wait:timeout'
    const holder = new DistributedLock(server.url)
    const waiter = new DistributedLock(server.url)
    const held = await holder.acquire(key, 10_000)
    try {
      const started = performance.now()
      let caught
      await assert.rejects(waiter.waitForLock(key, 500), (err) => {
        caught = err
        return assertAcquisitionError(err, key)
      })
      const elapsed = performance.now() - started
      assert.ok(elapsed >= 490, `rejected after ${elapsed.toFixed(0)} ms, before the 500 ms timeout`)
      assert.ok(elapsed < 900, `rejected after ${elapsed.toFixed(0)} ms`)
      assert.ok(caught.retriesAttempted > 0, `retriesAttempted was ${caught.retriesAttempted}`)
      await syncMonitor()
      const attempts = attemptsOn(key, [held.token])
      assert.equal(caught.retriesAttempted, attempts.length - 1, 'one retry per attempt after the first')
      // Polls every 100 ms over 500 ms: about 6 attempts, certainly not a busy loop.
      assert.ok(attempts.length >= 4 && attempts.length <= 8, `saw ${attempts.length} attempts`)
      assert.equal(await holder.isLocked(key), true)
    } finally {
      await held.release()
    }
  })

  test('resolves soon after the holder releases', async () => {
    const key = 'wait:release'
    const holder = new DistributedLock(server.url)
    const waiter = new DistributedLock(server.url)
    const held = await holder.acquire(key, 10_000)
    const started = performance.now()
    let releasedAt
    const releasing = sleep(300).then(async () => {
      await held.release()
      releasedAt = performance.now() - started
    })
    const won = await waiter.waitForLock(key, 2000)
    const elapsed = performance.now() - started
    await releasing
    try {
      assert.equal(won.isHeld, true)
      assert.equal(won.key, key)
      assert.ok(won.fence > held.fence)
      assert.ok(elapsed >= 290, `resolved after ${elapsed.toFixed(0)} ms, while the holder still held it`)
      assert.ok(elapsed >= releasedAt - 50, 'resolved only after the release')
      // Next poll after the release: at most one poll interval (100 ms) later, plus slack.
      assert.ok(elapsed < 700, `resolved after ${elapsed.toFixed(0)} ms (released at ${releasedAt.toFixed(0)} ms)`)
      assert.equal(held.isHeld, false)
    } finally {
      await won.release()
    }
  })

  test("wakes when the holder's TTL runs out, not after the full poll delay", async () => {
    const key = 'wait:ttl-wake'
    const holder = new DistributedLock(server.url)
    const waiter = new DistributedLock(server.url, { retryDelayMs: 1000 })
    const started = performance.now()
    const held = await holder.acquire(key, 250) // never released: it expires
    const won = await waiter.waitForLock(key, 2000, 5000)
    const elapsed = performance.now() - started
    try {
      assert.equal(won.isHeld, true)
      assert.ok(won.fence > held.fence)
      assert.ok(elapsed >= 240, `resolved after ${elapsed.toFixed(0)} ms, before the holder's TTL ended`)
      assert.ok(elapsed < 600, `resolved after ${elapsed.toFixed(0)} ms: it slept the whole 1000 ms poll`)
      await syncMonitor()
      const attempts = attemptsOn(key, [held.token])
      assert.ok(attempts.length >= 2 && attempts.length <= 3, `saw ${attempts.length} attempts`)
    } finally {
      await won.release()
    }
  })

  test('is not bounded by maxRetries: with maxRetries 0 it polls until the timeout', async () => {
    const key = 'wait:not-max-retries'
    const holder = new DistributedLock(server.url)
    const waiter = new DistributedLock(server.url, { maxRetries: 0, retryDelayMs: 50 })
    const held = await holder.acquire(key, 10_000)
    try {
      const started = performance.now()
      const stop = lateness()
      let caught
      await assert.rejects(waiter.waitForLock(key, 400), (err) => {
        caught = err
        return assertAcquisitionError(err, key)
      })
      const elapsed = performance.now() - started
      // A first attempt that load held back shortens the span by as much.
      const late = stop()
      assert.ok(elapsed >= 390, `rejected after ${elapsed.toFixed(0)} ms`)
      await syncMonitor()
      const attempts = attemptsOn(key, [held.token])
      assert.ok(attempts.length > 2, `saw only ${attempts.length} attempts`)
      assert.ok(caught.retriesAttempted > 0)
      assert.equal(caught.retriesAttempted, attempts.length - 1)
      // The attempts span the whole wait, not just its start.
      const span = attempts[attempts.length - 1] - attempts[0]
      assert.ok(
        span >= 380 - late,
        `attempts spanned only ${span.toFixed(0)} ms of the 400 ms wait (${late.toFixed(0)} ms late)`,
      )
    } finally {
      await held.release()
    }
  })
})
