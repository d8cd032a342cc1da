'use strict'

// The lock across real OS processes: mutual exclusion, a holder that dies (SIGKILL) without
// releasing, that the library never keeps a process alive, and what SIGTERM and SIGINT
// release (README "Lifecycle": nothing by themselves; a handler that releases frees at once).
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { LineChild } = require('./helpers/line-child')
const { killAll, startChild } = require('./helpers/child')
const { DistributedLock } = require('..')

const FIXTURES = path.join(__dirname, 'fixtures')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server
let client
const children = new Set()

/** A child node process running one of the fixtures. */
class Child extends LineChild {
  constructor(script, args, env) {
    super(path.join(FIXTURES, script), args, env, children)
  }
}

before(async () => {
  server = await startRedis()
  client = new Redis(server.url)
})

after(async () => {
  killAll(children)
  client?.disconnect()
  await server?.close()
})

describe('mutual exclusion across processes', () => {
  const PROCESSES = 4
  const ITERATIONS = 200

  /** Starts PROCESSES increment.js children, releases them together, waits for all. */
  async function runIncrementers(name, mode) {
    const keys = {
      LOCK_KEY: `proc:${name}:lock`,
      COUNTER_KEY: `proc:${name}:counter`,
      GO_KEY: `proc:${name}:go`,
    }
    const env = { REDIS_URL: server.url, ITERATIONS: String(ITERATIONS), MODE: mode, RETRY_DELAY_MS: '10', ...keys }
    const kids = Array.from({ length: PROCESSES }, () => new Child('increment.js', [], env))
    await Promise.all(kids.map((kid) => kid.waitForLine((line) => line === 'ready')))
    await client.rpush(keys.GO_KEY, ...kids.map((_, i) => `go-${i}`))
    const exits = await Promise.all(kids.map((kid) => kid.exited))
    exits.forEach((exit, i) => {
      assert.equal(exit.code, 0, `child ${i} exited with ${exit.code}/${exit.signal}: ${kids[i].stderr}`)
    })
    const reports = await Promise.all(kids.map((kid) => kid.waitForLine((line) => line.startsWith('{'), 1000)))
    const counter = Number(await client.get(keys.COUNTER_KEY))
    return { counter, reports: reports.map(({ line }) => JSON.parse(line)) }
  }

  test(`${PROCESSES} processes x ${ITERATIONS} locked read-modify-writes lose no update`, async () => {
    const { counter, reports } = await runIncrementers('locked', 'lock')
    assert.equal(counter, PROCESSES * ITERATIONS)
    // Every critical section had its own fencing token: each acquisition draws two (its own,
    // and the next, kept for a handover to a waiter of its process), and a waiter's first
    // attempt, a transaction, draws two even when it finds the lock held: strictly
    // increasing, not gap-free.
    const fences = reports.flatMap((r) => r.fences).map(Number)
    reports.forEach((r) => assert.equal(r.fences.length, ITERATIONS))
    assert.equal(new Set(fences).size, PROCESSES * ITERATIONS, 'fencing tokens are unique')
    const sorted = [...fences].sort((a, b) => a - b)
    assert.ok(sorted.every((f, i) => i === 0 || f - sorted[i - 1] >= 2), 'two fences drawn per acquisition')
    for (const r of reports) {
      const own = r.fences.map(Number)
      assert.ok(own.every((f, i) => i === 0 || f > own[i - 1]), 'fences increase within a process')
    }
  })

  test('control: the same read-modify-writes without the lock do lose updates', async () => {
    const { counter } = await runIncrementers('unlocked', 'nolock')
    assert.ok(counter > 0)
    assert.ok(counter < PROCESSES * ITERATIONS, `no update was lost (${counter}): the control proves nothing`)
  })
})

describe('a holder killed with SIGKILL', () => {
  test('its lock stays held until its TTL (1000 ms) runs out, then is acquirable', async () => {
    const key = 'proc:victim'
    const lock = new DistributedLock(server.url)
    const holder = new Child('hold.js', [], { REDIS_URL: server.url, LOCK_KEY: key })
    const report = await holder.waitForLine((line) => line.startsWith('{'))
    await holder.waitForLine((line) => line === 'held')
    process.kill(holder.pid, 'SIGKILL')
    const exit = await holder.exited
    assert.equal(exit.signal, 'SIGKILL')
    const { fence, heldAt, expiresAt } = JSON.parse(report.line)
    const sentAt = expiresAt - 1000 // the holder sent its SET at or after this instant

    assert.equal(await lock.tryAcquire(key, 5000), null, 'still held right after the holder died')
    assert.equal(await lock.isLocked(key), true)

    let handle = null
    const deadline = Date.now() + 3000
    while (handle === null && Date.now() < deadline) {
      handle = await lock.tryAcquire(key, 5000)
      if (handle === null) await sleep(10)
    }
    const freedAt = Date.now()
    assert.ok(handle, 'the lock never became free')
    try {
      assert.ok(freedAt - sentAt >= 950, `acquirable ${freedAt - sentAt} ms after the holder asked for it, before its TTL`)
      assert.ok(freedAt - heldAt < 1600, `acquirable only ${freedAt - heldAt} ms after the holder took it`)
      assert.ok(handle.fence > fence, `new fence ${handle.fence} should follow the dead holder's ${fence}`)
      assert.equal(handle.isHeld, true)
    } finally {
      await handle.release()
    }
  })
})

describe('nothing keeps the process alive', () => {
  async function runLifecycle(mode, prefix) {
    const kid = new Child('lifecycle.js', [mode], { REDIS_URL: server.url, KEY_PREFIX: prefix })
    const done = await kid.waitForLine((line) => line.startsWith('done'))
    const exit = await kid.exited
    assert.equal(exit.code, 0, `exit ${exit.code}/${exit.signal}: ${kid.stderr}`)
    const lingered = exit.at - done.at
    assert.ok(lingered < 1000, `the process lived on ${lingered.toFixed(0)} ms after its work was done`)
    return JSON.parse(done.line.slice('done '.length))
  }

  test('after acquiring, extending and releasing locks, the process exits on its own', async () => {
    const prefix = 'proc:life-full'
    const result = await runLifecycle('full', prefix)
    assert.equal(result.fences.length, 3)
    assert.deepEqual(result.held, [false, false, false])
    const lock = new DistributedLock(server.url)
    for (const name of ['a', 'b', 'c']) assert.equal(await lock.isLocked(`${prefix}:${name}`), false)
  })

  test('a DistributedLock that never called Redis does not keep the process alive', async () => {
    const result = await runLifecycle('idle', 'proc:life-idle')
    assert.equal(result, null)
  })

  test('a tryAcquire that finds the key held (null) does not keep the process alive', async () => {
    const prefix = 'proc:life-contended'
    const lock = new DistributedLock(server.url)
    const held = await lock.acquire(`${prefix}:held-by-parent`, 10_000)
    try {
      const result = await runLifecycle('contended', prefix)
      assert.deepEqual(result, { handle: null })
      assert.equal(await lock.isLocked(`${prefix}:held-by-parent`), true)
    } finally {
      await held.release()
    }
  })
})

describe('shutdown on SIGTERM and SIGINT', () => {
  /** A holder in a child process, told `signal`; resolves with its exit code once it ended. */
  async function holdThenSignal(key, signal, env) {
    const kid = startChild(path.join(FIXTURES, 'hold-until-signal.js'), { REDIS_URL: server.url, LOCK_KEY: key, ...env }, children)
    await kid.ready
    assert.equal(await client.exists(`lock:${key}`), 1, 'held before the signal')
    process.kill(kid.proc.pid, signal)
    const code = await kid.exited
    return { code, kid }
  }

  /** Whether another holder can take `key` now (released by the child, or not). */
  async function takenByAnother(key) {
    const handle = await new DistributedLock(server.url).tryAcquire(key, 1_000)
    if (handle === null) return false
    await handle.release()
    return true
  }

  for (const signal of ['SIGTERM', 'SIGINT']) {
    for (const keepAlive of [false, true]) {
      const held = keepAlive ? 'a kept-alive lock' : 'a lock'
      test(`${signal} with Node's default handler: the process ends, ${held} stays until its TTL`, async () => {
        const key = `shutdown:default:${signal}:${keepAlive}`
        const { code, kid } = await holdThenSignal(key, signal, { KEEP_ALIVE: keepAlive ? '1' : '0' })
        assert.equal(code, null, `ended by the signal, not by a handler: ${kid.stderr}`)
        assert.equal(kid.proc.signalCode, signal)
        const ttl = await client.pttl(`lock:${key}`)
        assert.ok(ttl > 20_000 && ttl <= 30_000, `left to its TTL, got PTTL ${ttl}`)
        assert.equal(await takenByAnother(key), false, 'still held after the holder died')
      })
    }

    test(`${signal} caught and the lock released, as README advises: free at once`, async () => {
      const key = `shutdown:release:${signal}`
      const { code, kid } = await holdThenSignal(key, signal, { ON_SIGNAL: 'release' })
      assert.equal(code, 0, kid.stderr)
      assert.equal(await client.exists(`lock:${key}`), 0, 'released before the exit')
      assert.equal(await takenByAnother(key), true)
    })

    test(`${signal} caught and process.exit() called: a kept-alive lock is released, a plain one is not`, async () => {
      const kept = `shutdown:exit:${signal}:kept`
      const ended = await holdThenSignal(kept, signal, { ON_SIGNAL: 'exit', KEEP_ALIVE: '1' })
      assert.equal(ended.code, 0, ended.kid.stderr)
      assert.equal(await client.exists(`lock:${kept}`), 0, 'a kept-alive lock released at process.exit()')
      const plain = `shutdown:exit:${signal}:plain`
      const left = await holdThenSignal(plain, signal, { ON_SIGNAL: 'exit' })
      assert.equal(left.code, 0, left.kid.stderr)
      assert.ok((await client.pttl(`lock:${plain}`)) > 20_000, 'a plain lock left to its TTL')
    })
  }
})
