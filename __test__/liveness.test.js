'use strict'

// Process liveness of ExclusiveLock (the refresh runs on the native watchdog; a JS keep-alive
// timer mirrors the original's interval), its stall guard against a blocked JS thread, a
// holder killed with SIGKILL, and mutual exclusion across OS processes for ExclusiveLock and
// maestro's DistributedLockService. Every scenario runs in child processes.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { LineChild } = require('./helpers/line-child')
const { killAll } = require('./helpers/child')
const { ExclusiveLock } = require('..')

const FIXTURES = path.join(__dirname, 'fixtures')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server
let client
const children = new Set()
const locks = new Set() // ExclusiveLocks of this process, released in after()

/**
 * A child node process running one of the fixtures, without the MO_ settings of this
 * process's environment; `waitFor(word)` parses its "<word> <epoch> [json]" lines.
 */
class Child extends LineChild {
  constructor(script, args, env) {
    super(path.join(FIXTURES, script), args, env, children, (name) => name.startsWith('MO_'))
  }

  /** The first line starting with `word`, parsed, with its arrival. */
  async waitFor(word, timeoutMs = 15_000) {
    const found = await this.waitForLine((line) => line === word || line.startsWith(`${word} `), timeoutMs, `"${word}"`)
    const [, epoch, ...rest] = found.line.split(' ')
    const json = rest.join(' ')
    return { line: found.line, at: found.at, epoch: Number(epoch), data: json ? JSON.parse(json) : undefined }
  }
}

function exclusiveChild(mode, env) {
  return new Child('live-exclusive.js', [mode], { REDIS_URL: server.url, ...env })
}

/** An ExclusiveLock in this process, on the same lock as the children's. */
function localLock(name, extra) {
  const lock = new ExclusiveLock({ name, cache_connection: server.url, lock_ttl_ms: 3000, lock_refresh_ms: 1000, ...extra })
  locks.add(lock)
  return lock
}

before(async () => {
  server = await startRedis()
  client = new Redis(server.url)
})

after(async () => {
  killAll(children)
  for (const lock of locks) await lock.release().catch(() => {})
  client?.disconnect()
  await server?.close()
})

describe('ExclusiveLock keeps its process alive exactly while held', () => {
  test('an idle holder stays alive and keeps the lock until told to release, then exits', async () => {
    const name = 'live-idle-holder'
    const kid = exclusiveChild('hold', { LOCK_NAME: name, LOCK_TTL_MS: '1000', LOCK_REFRESH_MS: '300' })
    const held = await kid.waitFor('held')
    assert.equal(held.data.key, `exclusive-lock:${name}`)
    await sleep(2000)
    assert.ok(kid.running, `the holder exited (${JSON.stringify(kid.exit)}) with the lock held; stderr: ${kid.stderr}`)
    const probe = localLock(name)
    const seen = await probe.inspect()
    assert.ok(seen, 'the lock is gone although its holder is alive')
    assert.equal(seen.lock_contents, '1')
    assert.ok(seen.lock_ttl_ms > 0 && seen.lock_ttl_ms <= 1000, `inspect() TTL ${seen.lock_ttl_ms}`)
    assert.equal(await probe.acquire(), false, 'another instance took a held lock')

    process.kill(kid.pid, 'SIGUSR2')
    const released = await kid.waitFor('released', 5000)
    assert.deepEqual(released.data, { acquired: false })
    const exit = await kid.exitWithin(3000)
    assert.ok(exit, `still running 3 s after printing 'released'`)
    assert.equal(exit.code, 0, `exit ${exit.code}/${exit.signal}: ${kid.stderr}`)
    const lingered = exit.at - released.at
    assert.ok(lingered < 1000, `lived on ${lingered.toFixed(0)} ms after releasing`)
    assert.equal(await probe.inspect(), null, 'release() left the lock in Redis')
    assert.equal(await client.exists(held.data.key), 0)
  })

  test('unref(): the holder returns and exits at once; the lock stays until its TTL runs out', async () => {
    const name = 'live-unref'
    const ttl = 2000
    const kid = exclusiveChild('unref', { LOCK_NAME: name, LOCK_TTL_MS: String(ttl), LOCK_REFRESH_MS: '500' })
    const held = await kid.waitFor('held')
    const exit = await kid.exitWithin(3000)
    assert.ok(exit, 'an unref()ed holder kept its process alive')
    assert.equal(exit.code, 0, `exit ${exit.code}/${exit.signal}: ${kid.stderr}`)
    const lingered = exit.at - held.at
    assert.ok(lingered < 1000, `lived on ${lingered.toFixed(0)} ms after returning`)

    const probe = localLock(name)
    const seen = await probe.inspect()
    assert.ok(seen, 'the lock vanished with the process: it should only expire by TTL')
    assert.ok(seen.lock_ttl_ms > 0 && seen.lock_ttl_ms <= ttl, `inspect() TTL ${seen.lock_ttl_ms}`)
    // Nobody refreshes it any more: it expires within its TTL of the exit.
    const deadline = exit.at + ttl + 700
    while ((await probe.inspect()) !== null) {
      assert.ok(performance.now() < deadline, 'the dead holder\'s lock outlived its TTL')
      await sleep(25)
    }
    assert.ok(performance.now() - exit.at > ttl - 1000 - 300, 'the lock expired much sooner than its TTL')
  })

  test('acquire, release, return: the process exits on its own', async () => {
    const kid = exclusiveChild('release', { LOCK_NAME: 'live-release', LOCK_TTL_MS: '1000', LOCK_REFRESH_MS: '300' })
    const done = await kid.waitFor('done')
    assert.deepEqual(done.data, { acquired: false })
    const exit = await kid.exitWithin(3000)
    assert.ok(exit, 'still running 3 s after releasing')
    assert.equal(exit.code, 0, `exit ${exit.code}/${exit.signal}: ${kid.stderr}`)
    assert.ok(exit.at - done.at < 1000, `lived on ${(exit.at - done.at).toFixed(0)} ms after releasing`)
    assert.equal(await client.exists('exclusive-lock:live-release'), 0)
  })
})

// ttl 600 with refresh 100: the original's rule wants the refresh at least 500 ms below the TTL.
describe('a blocked JS thread (stall guard, default max_stall_ms = 3 x ttl)', () => {
  /** Samples PTTL of `key` until `stop()` is true; each sample has the epoch it was taken. */
  async function samplePttl(key, stop) {
    const samples = []
    while (!stop()) {
      const before = Date.now()
      const pttl = await client.pttl(key)
      samples.push({ pttl, from: before, to: Date.now() })
      await sleep(10)
    }
    return samples
  }

  test('a 1200 ms busy loop (2 x ttl, < max_stall_ms): the lock stays held throughout, no error', async () => {
    const name = 'live-busy-short'
    const key = `exclusive-lock:${name}`
    const kid = exclusiveChild('busy', { LOCK_NAME: name, LOCK_TTL_MS: '600', LOCK_REFRESH_MS: '100', BUSY_MS: '1200' })
    const held = await kid.waitFor('held')
    assert.equal(held.data.max_stall_ms, 1800)
    let ended = false
    kid.waitFor('loop-end').then(() => { ended = true }, () => { ended = true })
    const samples = await samplePttl(key, () => ended)
    const start = await kid.waitFor('loop-start')
    const end = await kid.waitFor('loop-end')
    assert.ok(end.epoch - start.epoch >= 1200)
    const during = samples.filter((s) => s.from >= start.epoch && s.to <= end.epoch)
    assert.ok(during.length >= 20, `only ${during.length} PTTL samples during the loop`)
    const gone = during.filter((s) => s.pttl < 0)
    assert.deepEqual(gone, [], 'the lock expired while its holder was busy for less than max_stall_ms')
    assert.deepEqual(end.data, { acquired: true, errors: 0, spins: true })
    const afterLoop = await kid.waitFor('after')
    assert.deepEqual(afterLoop.data, { acquired: true, errors: [] }, 'the holder lost its lock')
    const exit = await kid.exitWithin(5000)
    assert.ok(exit, 'the holder did not exit after releasing')
    assert.equal(exit.code, 0, `exit ${exit.code}/${exit.signal}: ${kid.stderr}`)
    assert.equal(await client.exists(key), 0)
  })

  test('a 4000 ms busy loop (> max_stall_ms): the lock expires during it, ELOST arrives right after', async (t) => {
    const name = 'live-busy-long'
    const key = `exclusive-lock:${name}`
    const kid = exclusiveChild('busy', { LOCK_NAME: name, LOCK_TTL_MS: '600', LOCK_REFRESH_MS: '100', BUSY_MS: '4000' })
    const held = await kid.waitFor('held')
    assert.equal(held.data.max_stall_ms, 1800)
    const start = await kid.waitFor('loop-start')
    let ended = false
    kid.waitFor('loop-end').then(() => { ended = true }, () => { ended = true })
    const contender = localLock(name, { lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
    const contenderErrors = []
    contender.on('error', (err) => contenderErrors.push(err))
    let wonAt = null
    const samples = []
    while (!ended) {
      const before = Date.now()
      samples.push({ pttl: await client.pttl(key), from: before })
      if (wonAt === null && (await contender.acquire())) wonAt = Date.now()
      await sleep(10)
    }
    const end = await kid.waitFor('loop-end')
    assert.ok(end.epoch - start.epoch >= 4000)
    // The key is seen gone, or the contender took it first: it can win in the instant between
    // the key expiring and the next sample, and then no sample ever shows it gone.
    const seenGone = samples.find((s) => s.from > start.epoch && s.pttl === -2)?.from
    const goneAt = Math.min(seenGone ?? Infinity, wonAt ?? Infinity)
    assert.ok(goneAt !== Infinity, 'the key never disappeared while its holder was stalled')
    const sinceStart = goneAt - start.epoch
    assert.ok(sinceStart > 1000, `the lock expired ${sinceStart} ms into the loop, before max_stall_ms could pass`)
    assert.ok(wonAt !== null, 'the contender never got the lock')
    assert.ok(wonAt < end.epoch, `the contender got the lock ${wonAt - end.epoch} ms after the loop ended`)

    const lost = await kid.waitFor('error', 5000)
    assert.equal(lost.data.name, 'LockLostError')
    assert.equal(lost.data.code, 'ELOST')
    assert.equal(lost.data.key, key)
    const delay = lost.epoch - end.epoch
    t.diagnostic(`key gone ${sinceStart} ms into the loop, contender won ${wonAt - start.epoch} ms in, 'error' ${delay} ms after it`)
    assert.ok(delay >= 0 && delay < 250, `'error' came ${delay} ms after the loop ended`)
    const afterLoop = await kid.waitFor('after')
    assert.deepEqual(afterLoop.data, { acquired: false, errors: ['ELOST'] })
    const exit = await kid.exitWithin(5000)
    assert.ok(exit, 'the holder that lost its lock did not exit')
    assert.equal(exit.code, 0, `exit ${exit.code}/${exit.signal}: ${kid.stderr}`)

    // The stalled holder's clean-up did not touch the contender's lock.
    assert.equal(contender.acquired, true)
    const seen = await contender.inspect()
    assert.ok(seen && seen.lock_ttl_ms > 0, 'the contender\'s lock was deleted by the old holder')
    assert.deepEqual(contenderErrors, [])
    await contender.release()
    assert.equal(await client.exists(key), 0)
  })
})

describe('a holder killed with SIGKILL', () => {
  test('its ExclusiveLock becomes free within its TTL (1000 ms), not much sooner', async (t) => {
    const name = 'live-sigkill'
    const kid = exclusiveChild('hold', { LOCK_NAME: name, LOCK_TTL_MS: '1000', LOCK_REFRESH_MS: '300' })
    await kid.waitFor('held')
    await sleep(500) // a few refreshes in
    const contender = localLock(name)
    assert.equal(await contender.acquire(), false, 'the lock is free while its holder lives')
    process.kill(kid.pid, 'SIGKILL')
    const killedAt = performance.now()
    const exit = await kid.exitWithin(3000)
    assert.equal(exit?.signal, 'SIGKILL')
    let freedAt = null
    while (freedAt === null && performance.now() - killedAt < 3000) {
      if (await contender.acquire()) freedAt = performance.now()
      else await sleep(10)
    }
    assert.ok(freedAt !== null, 'the dead holder\'s lock never became free')
    const after = freedAt - killedAt
    t.diagnostic(`free ${after.toFixed(0)} ms after the kill`)
    assert.ok(after >= 600, `free ${after.toFixed(0)} ms after the kill: before the last refresh's TTL ran out`)
    assert.ok(after < 1600, `free only ${after.toFixed(0)} ms after the kill`)
    await contender.release()
  })
})

describe('mutual exclusion across 4 OS processes', () => {
  const PROCESSES = 4
  const ITERATIONS = 50

  async function runCounters(mode, env = {}) {
    const keys = { LOCK_NAME: `live-count-${mode}`, COUNTER_KEY: `live:${mode}:counter`, GO_KEY: `live:${mode}:go` }
    const kids = Array.from(
      { length: PROCESSES },
      () => new Child('live-count.js', [mode], { REDIS_URL: server.url, ITERATIONS: String(ITERATIONS), ...keys, ...env }),
    )
    await Promise.all(kids.map((kid) => kid.waitFor('ready')))
    await client.rpush(keys.GO_KEY, ...kids.map((_, i) => `go-${i}`))
    const exits = await Promise.all(kids.map((kid) => kid.exitWithin(40_000)))
    exits.forEach((exit, i) => {
      assert.ok(exit, `child ${i} did not finish`)
      assert.equal(exit.code, 0, `child ${i} exited ${exit.code}/${exit.signal}: ${kids[i].stderr}`)
    })
    const reports = kids.map((kid) => JSON.parse(kid.lines.find(({ line }) => line.startsWith('{')).line))
    return { counter: Number(await client.get(keys.COUNTER_KEY)), reports, lockName: keys.LOCK_NAME }
  }

  test(`ExclusiveLock: ${PROCESSES} x ${ITERATIONS} GET/pause/SET increments lose no update`, async () => {
    const { counter, reports, lockName } = await runCounters('exclusive')
    assert.equal(counter, PROCESSES * ITERATIONS)
    for (const report of reports) assert.equal(report.done, ITERATIONS)
    // There was contention: some attempts found the lock held.
    const attempts = reports.reduce((sum, r) => sum + r.attempts, 0)
    assert.ok(attempts > PROCESSES * ITERATIONS, `no acquire() ever failed (${attempts} attempts): nothing was tested`)
    assert.equal(await client.exists(`exclusive-lock:${lockName}`), 0)
  })

  test(`DistributedLockService: ${PROCESSES} x ${ITERATIONS} GET/pause/SET increments lose no update`, async () => {
    const { counter, reports, lockName } = await runCounters('service', {
      MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS: '5',
      MO_BACKOFF_MAX_DELAY_MS: '20',
    })
    assert.equal(counter, PROCESSES * ITERATIONS)
    for (const report of reports) assert.equal(report.done, ITERATIONS)
    assert.equal(await client.exists(lockName), 0)
  })
})
