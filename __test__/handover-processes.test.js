'use strict'

// Grants across processes (`crossProcessGrants: true`, README "Grants across processes"): a
// release gives the lock to the next waiting process, which holds it with no attempt of its
// own; a waiter killed while in line is skipped at once. Figures are printed, never asserted
// beyond their bounds (10x what is expected on an idle machine).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { startChild, killAll, line } = require('./helpers/child')
const { DistributedLock, ExclusiveLock } = require('..')
const DistributedLockService = require('../maestro')

const WORKER = path.join(__dirname, 'fixtures', 'grant-worker.js')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const now = () => performance.timeOrigin + performance.now()

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

/** The ring of connections waiting for the lock at `lockKey` (see basics/keys.rs). */
function ringKey(lockKey) {
  return Buffer.concat([Buffer.from(`{${lockKey}}`), Buffer.from([0xff]), Buffer.from('ring')])
}

async function ringLength(lockKey, length, timeoutMs = 5000) {
  const until = Date.now() + timeoutMs
  while ((await client.llen(ringKey(lockKey))) !== length) {
    if (Date.now() > until) throw new Error(`the ring of ${lockKey} never had ${length} entries`)
    await sleep(5)
  }
}

function worker(env) {
  return startChild(WORKER, { REDIS_URL: server.url, ...env }, children)
}

/** Three waiters started one after the other, each in line before the next: ring order. */
async function lineUp(lockKey, env) {
  const kids = []
  for (let i = 0; i < 3; i++) {
    const kid = worker(env)
    await kid.ready
    await ringLength(lockKey, i + 1)
    kids.push(kid)
  }
  return kids
}

/** Resolves once process `pid` is stopped (a signal is delivered when the kernel gets to it). */
async function haltedNow(pid) {
  const fs = require('node:fs')
  const until = Date.now() + 5000
  // /proc/<pid>/stat: "pid (comm) state ...": T once stopped.
  while (!/\) T /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))) {
    if (Date.now() > until) throw new Error(`process ${pid} never stopped`)
    await sleep(1)
  }
}

async function killed(kid) {
  const exited = kid.exited
  process.kill(kid.proc.pid, 'SIGKILL')
  await exited
  // Redis reads the closed socket within a millisecond on loopback.
  await sleep(20)
}

// What a skipped dead waiter, or a lapsed claim, may cost the next live one: a few ms on a quiet
// machine (the diagnostics print it), 10x that and more on a loaded CI runner; against the
// 30 s step maestro's waiters would otherwise sleep.
const BOUND_MS = 250

test('4 processes on one key with grants: the counter is exact, fences unique, and no wait long', async (t) => {
  const keys = { LOCK_KEY: 'grants:count', COUNTER_KEY: 'grants:count:n', GO_KEY: 'grants:count:go' }
  const ITERATIONS = 100
  const kids = Array.from({ length: 4 }, () => worker({ MODE: 'increment', ITERATIONS: String(ITERATIONS), ...keys }))
  await Promise.all(kids.map((kid) => kid.ready))
  const pttls = async () => Number(/cmdstat_pttl:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0)
  const pttlsBefore = await pttls()
  await client.rpush(keys.GO_KEY, '1', '1', '1', '1')
  const codes = await Promise.all(kids.map((kid) => kid.exited))
  assert.deepEqual(codes, [0, 0, 0, 0], kids.map((kid) => kid.stderr).join('\n'))
  assert.equal(Number(await client.get(keys.COUNTER_KEY)), 4 * ITERATIONS)
  // A counter its connections know kept is not read again: neither by the attempts taking the
  // lock back within a tenure nor by the blocks grants draw (ops/kept_fences.rs); one read per
  // section before.
  const read = (await pttls()) - pttlsBefore
  // (Bounded at a quarter of that: an attempt joining the ring reads the holder's PTTL too,
  // more of them when a loaded machine lets grant claims lapse.)
  assert.ok(read < ITERATIONS, `${read} PTTLs for ${4 * ITERATIONS} sections`)
  const outs = await Promise.all(kids.map((kid) => line(kid, 'fences')))
  const fences = outs.flatMap((out) => out.fences.map(BigInt))
  assert.equal(new Set(fences.map(String)).size, 4 * ITERATIONS)
  // Each waits for at most the others' tenures (1 ms each, README "Tenure") and hand-overs:
  // a few ms on a quiet machine; the bound is its poll (100 ms) x 10, never reached by grants.
  const maxWaitMs = Math.max(...outs.map((out) => out.maxWaitMs))
  const stats = await client.info('commandstats')
  const grants = Number(/cmdstat_spublish:calls=(\d+)/.exec(stats)?.[1] ?? 0)
  t.diagnostic(`max wait ${maxWaitMs.toFixed(2)} ms; ${grants} grants (publishes), ${read} PTTLs for ${4 * ITERATIONS} sections`)
  assert.ok(maxWaitMs < 1000, `a wait took ${maxWaitMs} ms`)
  // Grants went round: the ring turned (a release that found nobody in it would not).
  const turns = /cmdstat_rpoplpush:calls=(\d+)/.exec(await client.info('commandstats'))
  assert.ok(turns && Number(turns[1]) > 0, 'no release granted the lock')
})

test('a waiter SIGKILLed in line is skipped: the next live waiter holds within 250 ms of the release', async (t) => {
  const lockKey = 'lock:grants:kill'
  const lock = new DistributedLock(server.url, { crossProcessGrants: true })
  const handle = await lock.acquire('grants:kill', 30_000)
  const [first, second, third] = await lineUp(lockKey, { MODE: 'wait', LOCK_KEY: 'grants:kill', TTL_MS: '10000' })
  await killed(first)
  const released = now()
  await handle.release()
  const { held } = await line(second, 'held')
  const after = held - released
  t.diagnostic(`next live waiter held ${after.toFixed(2)} ms after the release`)
  assert.ok(after < BOUND_MS, `held ${after} ms after the release`)
  // It releases to the third in turn.
  await line(third, 'held')
  assert.deepEqual(await Promise.all([second.exited, third.exited]), [0, 0])
})

test('maestro with its default backoff (30 s cap): a killed waiter is skipped, the next holds within 250 ms', async (t) => {
  const lockKey = 'grants:maestro'
  const holder = new DistributedLockService(lockKey, 30_000, server.url, { crossProcessGrants: true })
  assert.equal(await holder.acquire(30_000, 0), true)
  const [first, second, third] = await lineUp(lockKey, { MODE: 'service', LOCK_KEY: lockKey, TTL_MS: '10000' })
  // Every waiter is past its first attempt: its next is due only after a backoff step.
  await sleep(200)
  await killed(first)
  const released = now()
  assert.equal(await holder.release(), true)
  const { held } = await line(second, 'held')
  const after = held - released
  t.diagnostic(`maestro's next live waiter held ${after.toFixed(2)} ms after the release`)
  assert.ok(after < BOUND_MS, `held ${after} ms after the release`)
  const { held: thirdHeld } = await line(third, 'held')
  assert.ok(thirdHeld !== null)
  t.diagnostic(`the third held ${(thirdHeld - released).toFixed(2)} ms after the release`)
  assert.deepEqual(await Promise.all([second.exited, third.exited]), [0, 0])
})

test('a grantee SIGSTOPped as it is granted keeps the lock its claim only; resumed, it never holds it over the next', async (t) => {
  const CLAIM = 1000
  const lockKey = 'lock:grants:stop'
  const lock = new DistributedLock(server.url, { crossProcessGrants: true })
  const handle = await lock.acquire('grants:stop', 30_000)
  // The waiters poll every 20 ms: a claim that ran out publishes nothing, a poll finds it.
  const env = { MODE: 'wait', LOCK_KEY: 'grants:stop', TTL_MS: '10000', POLL_MS: '20', HOLD_MS: '300' }
  const stopped = worker(env)
  await stopped.ready
  await ringLength(lockKey, 1)
  const next = worker(env)
  await next.ready
  await ringLength(lockKey, 2)
  process.kill(stopped.proc.pid, 'SIGSTOP')
  await haltedNow(stopped.proc.pid)
  const released = now()
  await handle.release()
  const nextHeld = await line(next, 'held')
  const after = nextHeld.held - released
  t.diagnostic(`the next waiter held ${after.toFixed(2)} ms after the release (claim ${CLAIM} ms)`)
  assert.ok(after >= CLAIM - 5 && after <= CLAIM + BOUND_MS, `held ${after} ms after the release`)
  process.kill(stopped.proc.pid, 'SIGCONT')
  const nextDone = await line(next, 'afterHold')
  assert.equal(nextDone.isHeld, true)
  // Resumed, it learns the grant is gone: it holds only once the next one was done with it (its
  // last use, printed before its release: a grantee that starts on the grant at once may hold
  // before the releaser's own reply has come back), fenced past it.
  const late = await line(stopped, 'held')
  assert.ok(late.held >= nextDone.afterHold, `held at ${late.held}, the next done at ${nextDone.afterHold}`)
  assert.ok(BigInt(late.fence) > BigInt(nextHeld.fence))
  assert.equal((await line(stopped, 'afterHold')).wrote, true)
  assert.deepEqual(await Promise.all([stopped.exited, next.exited]), [0, 0])
})

test('a grantee holding 3 x the claim keeps the lock: nobody else holds it meanwhile', async () => {
  const lockKey = 'lock:grants:long'
  const lock = new DistributedLock(server.url, { crossProcessGrants: true })
  const handle = await lock.acquire('grants:long', 30_000)
  const env = { MODE: 'wait', LOCK_KEY: 'grants:long', TTL_MS: '10000', POLL_MS: '20' }
  const long = worker({ ...env, HOLD_MS: '3000' })
  await long.ready
  await ringLength(lockKey, 1)
  const next = worker({ ...env, HOLD_MS: '10' })
  await next.ready
  await ringLength(lockKey, 2)
  await handle.release()
  const held = await line(long, 'held')
  const done = await line(long, 'afterHold')
  // Still held by its own clock, and its fenced write went through: no later holder wrote first.
  assert.equal(done.isHeld, true)
  assert.equal(done.wrote, true)
  await line(long, 'released')
  const nextHeld = await line(next, 'held')
  // After the long one's last use (printed before its release): the next, starting on its grant
  // at once, may hold before the releaser's own reply has come back.
  assert.ok(nextHeld.held >= done.afterHold, `the next held at ${nextHeld.held}, before ${done.afterHold}`)
  assert.ok(BigInt(nextHeld.fence) > BigInt(held.fence))
  assert.deepEqual(await Promise.all([long.exited, next.exited]), [0, 0])
})

/** Redis's MONITOR on its own connection: every command run, scripts' included, as [time s, args]. */
async function monitor() {
  const seen = []
  const watching = await client.monitor()
  watching.on('monitor', (time, args) => seen.push([Number(time), args]))
  return { seen, stop: () => watching.disconnect() }
}

test('a grant is confirmed a third of its claim after it, not at once: a grantee done before then sends no confirmation', async (t) => {
  const lockKey = 'lock:grants:defer'
  const lock = new DistributedLock(server.url, { crossProcessGrants: true })
  // Polls every 50 ms (stretched to 100 ms in the ring): a grant finds its anchor, the last
  // request answered, fresh. Alone in the ring, the grantee never wins the lock by a poll.
  const env = { MODE: 'wait', LOCK_KEY: 'grants:defer', TTL_MS: '10000', POLL_MS: '50' }
  /** One grantee holding `hold` ms: the lock's grants and confirmations meanwhile. */
  async function grantTo(hold) {
    const handle = await lock.acquire('grants:defer', 30_000)
    const kid = worker({ ...env, HOLD_MS: String(hold) })
    await kid.ready
    await ringLength(lockKey, 1)
    await sleep(200)
    const watch = await monitor()
    try {
      await handle.release()
      await line(kid, 'held')
      if (hold > 0) assert.equal((await line(kid, 'afterHold')).wrote, true)
      await line(kid, 'released')
      // Past the confirmation's due time: one still pending would have been sent.
      await sleep(600)
    } finally {
      watch.stop()
    }
    assert.equal(await kid.exited, 0)
    const named = (command) => watch.seen.filter(([, args]) => args[0].toLowerCase() === command && args[1] === lockKey)
    // A grant sets the lock for its claim; a confirmation gives it the grantee's TTL (20 s).
    return { grants: named('set').filter(([, args]) => args.includes('1000')), confirms: named('pexpire') }
  }
  const quick = await grantTo(0)
  assert.equal(quick.grants.length, 1)
  assert.deepEqual(quick.confirms, [])
  const slow = await grantTo(800)
  assert.equal(slow.grants.length, 1)
  assert.equal(slow.confirms.length, 1, JSON.stringify(slow.confirms))
  assert.equal(slow.confirms[0][1][2], '20000')
  const after = slow.confirms[0][0] - slow.grants[0][0]
  t.diagnostic(`confirmed ${(after * 1000).toFixed(1)} ms after its grant`)
  // Due a third of the claim after its anchor (a request answered before the grant ran).
  assert.ok(after >= 0.1, `confirmed ${after} s after the grant`)
})

test('a grantee that extends before its confirmation is due confirms first: the extend is not undone by it', async () => {
  const lockKey = 'lock:grants:extend'
  const lock = new DistributedLock(server.url, { crossProcessGrants: true })
  const handle = await lock.acquire('grants:extend', 30_000)
  const kid = worker({ MODE: 'wait', LOCK_KEY: 'grants:extend', TTL_MS: '10000', POLL_MS: '5000', HOLD_MS: '1500', EXTEND_MS: '60000' })
  await kid.ready
  await ringLength(lockKey, 1)
  await handle.release()
  await line(kid, 'extended')
  // Past the confirmation's due time: its TTL (20 s) would have replaced the extended one.
  await sleep(500)
  const left = await client.pttl(lockKey)
  assert.ok(left > 60_000, `the lock has ${left} ms left`)
  const done = await line(kid, 'afterHold')
  assert.equal(done.isHeld, true)
  assert.equal(done.wrote, true)
  await line(kid, 'released')
  assert.equal(await kid.exited, 0)
  assert.equal(await client.exists(lockKey), 0)
})

test('a process that exits while in a ring leaves it: no grant is sent to it as it goes', async () => {
  const lockKey = 'lock:grants:exit'
  await client.set(lockKey, 'someone else', 'PX', 30_000)
  const kid = worker({ MODE: 'linger', LOCK_KEY: 'grants:exit', TTL_MS: '10000', WAIT_MS: '1000', EXIT_KEY: 'grants:exit:go' })
  await kid.ready
  await ringLength(lockKey, 1)
  await line(kid, 'gaveUp')
  // Still in the ring after its waiter gave up: a grant that came now would be passed on.
  assert.equal(await client.llen(ringKey(lockKey)), 1)
  await client.rpush('grants:exit:go', '1')
  assert.equal(await kid.exited, 0, kid.stderr)
  // Left as it exited, not at the next release's publish nobody hears.
  assert.equal(await client.llen(ringKey(lockKey)), 0)
  await client.del(lockKey)
})

test('crossProcessGrants must be a boolean, named in the error, before any call', () => {
  for (const bad of ['yes', 1, null]) {
    assert.throws(() => new DistributedLock(server.url, { crossProcessGrants: bad }), (err) => {
      assert.equal(err.code, 'EINVAL')
      assert.match(err.message, /options\.crossProcessGrants/)
      return true
    })
    assert.throws(() => new DistributedLockService('k', 1000, server.url, { crossProcessGrants: bad }), /options\.crossProcessGrants/)
    // ExclusiveLock's options are snake_case, its errors the original's schema errors.
    assert.throws(
      () => new ExclusiveLock({ name: 'k', cache_connection: server.url, cross_process_grants: bad }),
      (err) => err.code === 'EINVAL' && err.errors?.[0]?.instancePath === '/cross_process_grants',
    )
  }
  assert.ok(new ExclusiveLock({ name: 'k', cache_connection: server.url, cross_process_grants: true }))
})
