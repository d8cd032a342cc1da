'use strict'

// maestro's DistributedLockService (`require('../maestro')`): constructor rules, the cache
// instances it accepts, its Redis layout, acquire's wait and backoff, the auto-refresh,
// release/disconnect, a lost lock, and that it never touches a key it does not own.
// Runs on a private redis-server, or on the embedded memory:// backend with NRL_BACKEND=memory
// (`npm test` runs both; see helpers/backend.js).
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const readline = require('node:readline')
const { createClient } = require('redis')
const { startBackend, redisOnly } = require('./helpers/backend')
const { killAll } = require('./helpers/child')

// maestro's configuration is read once, at load: this process runs on the defaults.
for (const name of Object.keys(process.env)) if (name.startsWith('MO_')) delete process.env[name]
const DistributedLockService = require('../maestro')

const FIXTURES = path.join(__dirname, 'fixtures')
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let backend
let probe // our ioredis client, to look at Redis
const services = new Set() // released in after(): a held lock keeps this process alive
const clients = [] // ioredis / node-redis clients to close in after()
const children = new Set()
let keyCount = 0
const freshKey = (label) => `service-test:${label}:${++keyCount}`

function service(key, ttl, cache = backend.url) {
  const s = new DistributedLockService(key, ttl, cache)
  services.add(s)
  return s
}

/** A fake of maestro's RedisCacheClient: its node-redis client in `_client`, the cache API beside it. */
function fakeMaestroCache({ connected = false } = {}) {
  const calls = []
  const record = (name) => async (...args) => {
    calls.push([name, ...args])
    return name === 'get' ? null : true
  }
  return {
    _client: createClient({ url: backend.url }),
    isConnected: connected,
    calls,
    setIfNotExists: record('setIfNotExists'),
    get: record('get'),
    del: record('del'),
    expire: record('expire'),
    connect: record('connect'),
    disconnect: record('disconnect'),
  }
}

/** Records, through MONITOR, every command Redis runs on `key` (scripts' commands included). */
async function watchKey(key) {
  const monitor = await probe.monitor()
  const seen = []
  monitor.on('monitor', (time, args, source) => {
    if (args.some((arg) => arg === key)) seen.push({ args, source })
  })
  return {
    seen,
    async stop() {
      await sleep(100) // MONITOR lines trail the commands
      monitor.disconnect()
      return seen
    },
  }
}

/** The acquire script's SET NX attempts by the holder of `value` on `key`. */
// Our attempts: each draws its own token, so anything but the other holder's value.
const attemptsOf = (seen, key, otherHolder = 'someone-else') =>
  seen.filter(({ args }) => args[0].toUpperCase() === 'SET' && args[1] === key && args[2] !== otherHolder && args.includes('NX'))

/** Runs a fixture; resolves with its stdout lines and exit. */
function runChild(script, env, { onLine } = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('MO_')))
  const proc = spawn(process.execPath, [path.join(FIXTURES, script)], {
    env: { ...clean, REDIS_URL: backend.url, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.add(proc)
  const lines = []
  let stderr = ''
  proc.stderr.on('data', (chunk) => {
    stderr += chunk
  })
  readline.createInterface({ input: proc.stdout }).on('line', (line) => {
    const entry = { line, at: performance.now() }
    lines.push(entry)
    onLine?.(entry)
  })
  const done = new Promise((resolve) => {
    proc.once('exit', (code, signal) => {
      children.delete(proc)
      const at = performance.now()
      setTimeout(() => resolve({ code, signal, at, lines, stderr }), 100) // let stdout drain
    })
  })
  return { proc, lines, done, stderr: () => stderr }
}

before(async () => {
  backend = await startBackend()
  probe = backend.client()
})

after(async () => {
  killAll(children)
  for (const s of services) await s.release()
  for (const c of clients) {
    try {
      if (typeof c.quit === 'function' && c.isOpen) await c.quit()
      else if (typeof c.disconnect === 'function' && !('isOpen' in c)) c.disconnect()
    } catch {}
  }
  probe?.disconnect()
  await backend?.close()
})

describe('constructor', () => {
  test('a missing or non-string key: Error("Lock key must be a non-empty string")', () => {
    for (const key of ['', null, 5, undefined]) {
      assert.throws(
        () => new DistributedLockService(key, 1000, backend.url),
        (err) => Object.getPrototypeOf(err) === Error.prototype && err.message === 'Lock key must be a non-empty string',
        `key ${String(key)}`,
      )
    }
  })

  test('a TTL that is not a positive number: Error("TTL must be a positive number")', () => {
    for (const cache of [backend.url, null]) {
      for (const ttl of [0, -1, '100', null]) {
        assert.throws(
          () => new DistributedLockService('k', ttl, cache),
          (err) => Object.getPrototypeOf(err) === Error.prototype && err.message === 'TTL must be a positive number',
          `ttl ${String(ttl)}`,
        )
      }
    }
  })

  test('NaN, 1.5 and Infinity: our stricter RangeError with code EINVAL', () => {
    for (const ttl of [NaN, 1.5, Infinity, 2 ** 31]) {
      assert.throws(
        () => new DistributedLockService('k', ttl, backend.url),
        (err) => err instanceof RangeError && err.code === 'EINVAL' && /ttl/i.test(err.message),
        `ttl ${ttl}`,
      )
    }
  })

  test('a cacheInstance that is no Redis client: TypeError', () => {
    assert.throws(() => new DistributedLockService('k', 1000, 42), TypeError)
  })

  test('without a cacheInstance locking is disabled: acquire() false, release() true', async () => {
    const s = new DistributedLockService('service-test:no-cache', 1000)
    assert.equal(await s.acquire(), false)
    assert.equal(await s.acquire(1000, 10), false)
    assert.equal(await s.release(), true)
    const status = s.getStatus()
    assert.equal(status.hasCacheLayer, false)
    assert.equal(status.isLocked, false)
    assert.equal(status.hasAutoRefresh, false)
    assert.equal(status.cacheConnected, null) // `this.cacheLayer && ...`, as the original
    await s.disconnect()
    assert.equal(await probe.exists('service-test:no-cache'), 0)
  })
})

describe('cacheInstance variants', () => {
  async function roundTrip(label, cache) {
    const key = freshKey(label)
    const s = service(key, 1500, cache)
    assert.match(s.lockValue, UUID_V4)
    assert.equal(await s.acquire(), true, `${label}: acquire()`)
    assert.equal(await probe.get(key), s.lockValue, `${label}: value in Redis`)
    assert.equal(s.getStatus().isLocked, true)
    const other = service(key, 1500, cache)
    assert.equal(await other.acquire(1500, 50), false, `${label}: a second instance got a held lock`)
    assert.equal(await s.release(), true, `${label}: release()`)
    assert.equal(await probe.exists(key), 0, `${label}: the key outlived release()`)
    assert.equal(await other.acquire(1500, 50), true, `${label}: free after release`)
    assert.equal(await other.release(), true)
    return s
  }

  redisOnly('an ioredis client (not connected; only its settings are read)', async () => {
    const client = backend.client()
    clients.push(client)
    const s = await roundTrip('ioredis', client)
    assert.equal(s.getStatus().hasCacheLayer, true)
    assert.equal(client.status, 'wait', 'the user\'s client was connected behind their back')
  })

  redisOnly('a node-redis v4 client (createClient, not connected)', async () => {
    const client = createClient({ url: backend.url })
    clients.push(client)
    await roundTrip('node-redis', client)
    assert.equal(client.isOpen, false)
  })

  test('a redis:// URL', async () => {
    const s = await roundTrip('url', backend.url)
    assert.equal(s.getStatus().cacheConnected, undefined)
  })

  redisOnly("a maestro RedisCacheClient (node-redis client in _client, cache methods, isConnected)", async () => {
    const cache = fakeMaestroCache({ connected: true })
    clients.push(cache._client)
    const s = await roundTrip('maestro-cache', cache)
    assert.equal(s.getStatus().cacheConnected, true)
    cache.isConnected = false
    assert.equal(s.getStatus().cacheConnected, false)
  })
})

describe('Redis layout', () => {
  redisOnly('the key is lockKey verbatim, the value the lockValue (UUID v4), the TTL in ms', async () => {
    const key = 'service-test:layout:{jobs}:Producer Lock' // no prefix, no slugging
    const before = new Set(await probe.keys('*'))
    const s = service(key, 1500)
    assert.equal(await s.acquire(), true)
    assert.equal(await probe.get(key), s.getStatus().lockValue)
    assert.match(s.lockValue, UUID_V4)
    const pttl = await probe.pttl(key)
    assert.ok(pttl > 1400 && pttl <= 1500, `PTTL ${pttl} (ms precision, not rounded to seconds)`)
    const added = (await probe.keys('*')).filter((k) => !before.has(k))
    assert.ok(added.includes(key))
    for (const k of added) assert.ok(k.includes(key), `unexpected key ${k}: a prefix?`)
    assert.equal(await s.release(), true)
  })

  test('acquire(lockTtl) sets that TTL', async () => {
    const key = freshKey('lock-ttl')
    const s = service(key, 1500)
    assert.equal(await s.acquire(2500), true)
    const pttl = await probe.pttl(key)
    assert.ok(pttl > 2400 && pttl <= 2500, `PTTL ${pttl}`)
    assert.equal(await s.release(), true)
  })

  test('every instance has its own random lockValue', () => {
    const values = Array.from({ length: 50 }, () => new DistributedLockService('k', 1000, backend.url).lockValue)
    for (const value of values) assert.match(value, UUID_V4)
    assert.equal(new Set(values).size, values.length)
  })
})

describe('acquire() waits with maestro\'s backoff (default config: 30000 ms base, 18000 ms cap)', () => {
  /** Puts another holder's value on `key`. */
  const holdElsewhere = (key, ms = 10_000) => probe.set(key, 'someone-else', 'PX', ms)

  test('maxWaitTime defaults to 3 x the TTL (of the call, else of the instance)', async () => {
    const key = freshKey('default-wait')
    await holdElsewhere(key)
    // The instance's TTL far from the call's, so that 3 x each stay apart with room for a
    // loaded machine (over 1 s late seen): the call's TTL must win. Well short of a backoff
    // step (18 s) either way.
    const s = service(key, 1000)
    let started = performance.now()
    assert.equal(await s.acquire(), false)
    let elapsed = performance.now() - started
    assert.ok(elapsed >= 2980 && elapsed < 6000, `acquire() gave up after ${elapsed.toFixed(0)} ms, not 3 x 1000`)
    started = performance.now()
    assert.equal(await s.acquire(150), false)
    elapsed = performance.now() - started
    assert.ok(elapsed >= 430 && elapsed < 2500, `acquire(150) gave up after ${elapsed.toFixed(0)} ms, not 3 x 150 (3 x 1000 is 3000)`)
    assert.equal(await probe.get(key), 'someone-else')
  })

  redisOnly('acquire(1000, 300) on a held key: false at ~300 ms, after exactly 2 attempts', async () => {
    const key = freshKey('two-attempts')
    await holdElsewhere(key)
    const s = service(key, 1000)
    const watch = await watchKey(key)
    const started = performance.now()
    const won = await s.acquire(1000, 300)
    const elapsed = performance.now() - started
    const seen = await watch.stop()
    assert.equal(won, false)
    // Not 3 x the TTL (3000 ms), nor past the deadline by a backoff step (18 s).
    assert.ok(elapsed >= 290 && elapsed < 2500, `gave up after ${elapsed.toFixed(0)} ms`)
    // The 18 s backoff is cut to the deadline, where one last attempt is made.
    assert.equal(attemptsOf(seen, key).length, 2, JSON.stringify(seen))
  })

  test('the holder releases during the wait: ours gets it at the final attempt, at the deadline', async () => {
    const key = freshKey('final-attempt')
    await holdElsewhere(key)
    const s = service(key, 1000)
    // Freed well after the first attempt, which a loaded machine was seen to send 300 ms late.
    setTimeout(() => probe.del(key), 500)
    const started = performance.now()
    const won = await s.acquire(1000, 1500)
    const elapsed = performance.now() - started
    assert.equal(won, true)
    // Not at the release (500 ms): no attempt between the first and the deadline's.
    assert.ok(elapsed >= 1480 && elapsed < 3500, `won after ${elapsed.toFixed(0)} ms, not at the deadline`)
    assert.equal(await probe.get(key), s.lockValue)
    assert.equal(await s.release(), true)
  })

  redisOnly('short backoff (MO_* env in a child): false at ~maxWaitTime, never past it', async (t) => {
    const key = freshKey('short-backoff')
    await holdElsewhere(key)
    const watch = await watchKey(key)
    const run = runChild('service-wait.js', {
      LOCK_KEY: key,
      LOCK_TTL: '1000',
      MAX_WAIT: '500',
      MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS: '20',
      MO_BACKOFF_MAX_DELAY_MS: '80',
    })
    const exit = await run.done
    const seen = await watch.stop()
    assert.equal(exit.code, 0, exit.stderr)
    const result = JSON.parse(exit.lines[0].line)
    assert.equal(result.won, false)
    assert.equal(result.released, true)
    assert.ok(result.elapsed >= 490 && result.elapsed < 800, `gave up after ${result.elapsed.toFixed(0)} ms`)
    // Sleeps of 40, 80, 80, ... ms (+0-5 %) then a last attempt at 500 ms: at most 8 attempts.
    const attempts = attemptsOf(seen, key).length
    t.diagnostic(`${attempts} attempts in ${result.elapsed.toFixed(0)} ms`)
    assert.ok(attempts >= 4 && attempts <= 8, `${attempts} attempts`)
    assert.equal(await probe.get(key), 'someone-else')
  })

  redisOnly('short backoff (MO_* env in a child): gets the lock soon after the holder lets go', async () => {
    const key = freshKey('short-backoff-win')
    await holdElsewhere(key)
    const watch = await watchKey(key)
    const run = runChild('service-wait.js', {
      LOCK_KEY: key,
      LOCK_TTL: '1000',
      MAX_WAIT: '3000',
      MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS: '20',
      MO_BACKOFF_MAX_DELAY_MS: '80',
    })
    // Let go once the child has failed three attempts (it then sleeps 80-84 ms between them).
    const failed = () => watch.seen.filter(({ args }) => args[0].toUpperCase() === 'SET' && args.includes('NX')).length
    while (failed() < 3 && run.proc.exitCode === null) await sleep(5)
    await probe.del(key)
    const releasedAt = performance.now()
    await watch.stop()
    const exit = await run.done
    assert.equal(exit.code, 0, exit.stderr)
    const result = JSON.parse(exit.lines[0].line)
    assert.equal(result.won, true)
    assert.equal(result.released, true)
    const wonAt = exit.lines[0].at
    assert.ok(wonAt - releasedAt < 400, `won ${(wonAt - releasedAt).toFixed(0)} ms after the holder let go`)
    assert.ok(result.elapsed < 2500, `took ${result.elapsed.toFixed(0)} ms of the 3000 ms wait`)
    assert.equal(await probe.exists(key), 0)
  })
})

describe('maestro environment defaults (read at load; children)', () => {
  async function configWith(env) {
    const run = runChild('service-env.js', env)
    const exit = await run.done
    assert.equal(exit.code, 0, exit.stderr)
    return JSON.parse(exit.lines[0].line)
  }

  test('no MO_* variables: ttl 60000, retry delay 30000, max backoff 18000', async () => {
    assert.deepEqual(await configWith({}), {
      ttl: 60000,
      config: { ttlMs: 60000, retryDelayMs: 30000, maxBackoffMs: 18000 },
    })
  })

  test('each variable is honoured', async () => {
    const [ttl, base, retryBase, direct] = await Promise.all([
      configWith({ MO_DISTRIBUTED_LOCK_TTL_MS: '1234' }),
      configWith({ MO_TASK_PROCESSING_BASE_TTL_MS: '1000' }),
      configWith({ MO_RETRY_BASE_INTERVAL_MS: '100' }),
      configWith({ MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS: '5', MO_BACKOFF_MAX_DELAY_MS: '20' }),
    ])
    assert.equal(ttl.ttl, 1234)
    assert.deepEqual(base, { ttl: 2000, config: { ttlMs: 2000, retryDelayMs: 1000, maxBackoffMs: 18000 } })
    assert.deepEqual(retryBase.config, { ttlMs: 60000, retryDelayMs: 30000, maxBackoffMs: 600 })
    assert.deepEqual(direct.config, { ttlMs: 60000, retryDelayMs: 5, maxBackoffMs: 20 })
  })

  test("invalid values ('abc', '-5') fall back to the defaults", async () => {
    const defaults = { ttl: 60000, config: { ttlMs: 60000, retryDelayMs: 30000, maxBackoffMs: 18000 } }
    const results = await Promise.all(
      ['abc', '-5'].map((bad) =>
        configWith({
          MO_DISTRIBUTED_LOCK_TTL_MS: bad,
          MO_TASK_PROCESSING_BASE_TTL_MS: bad,
          MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS: bad,
          MO_BACKOFF_MAX_DELAY_MS: bad,
          MO_RETRY_BASE_INTERVAL_MS: bad,
        }),
      ),
    )
    for (const result of results) assert.deepEqual(result, defaults)
  })
})

describe('auto-refresh, release and status', () => {
  test('a 900 ms lock survives 3 s (refreshed every ttl/3) and is not refreshed after release()', async () => {
    const key = freshKey('refresh')
    const s = service(key, 900)
    assert.equal(await s.acquire(), true)
    let lowest = Infinity
    const until = performance.now() + 3000
    while (performance.now() < until) {
      lowest = Math.min(lowest, await probe.pttl(key))
      await sleep(20)
    }
    assert.ok(lowest > 300, `PTTL fell to ${lowest}: not refreshed every 300 ms`)
    assert.equal(await probe.get(key), s.lockValue)
    assert.equal(s.getStatus().isLocked, true)
    assert.equal(s.getStatus().hasAutoRefresh, true)

    assert.equal(await s.release(), true)
    assert.equal(await probe.exists(key), 0)
    assert.equal(await s.release(), true, 'a second release()')
    // Our own value back on the key: a refresh left running after release() would keep it.
    await probe.set(key, s.lockValue, 'PX', 600)
    assert.equal(await s.release(), true)
    assert.equal(await probe.get(key), s.lockValue, 'release() without a hold touched the key')
    await sleep(1000)
    assert.equal(await probe.exists(key), 0, 'the key was refreshed after release()')
  })

  test('refreshed every ttl/3 as maestro, never sooner, even beside other locks due in between', async () => {
    // Holds on one connection, started 1.2 s apart: each one's refresh falls in the others'
    // intervals, where a watchdog batching refreshes early would take them along.
    const TTL = 9000 // refreshed every 3000 ms
    const READ_AT = 2100 // well inside the first interval, 900 ms before the refresh is due
    const holds = []
    for (let i = 0; i < 4; i++) {
      if (i > 0) await sleep(1200)
      const s = service(freshKey('punctual'), TTL)
      assert.equal(await s.acquire(), true)
      const acquired = performance.now()
      const read = sleep(READ_AT).then(async () => {
        const after = performance.now() - acquired
        return { ttl: await probe.pttl(s.getLockKey()), after }
      })
      holds.push({ s, read })
    }
    const reads = await Promise.all(holds.map((hold) => hold.read))
    for (const { s } of holds) await s.release()
    for (const [i, { ttl, after }] of reads.entries()) {
      // Set no sooner than acquire() was called and not refreshed since.
      assert.ok(ttl <= TTL - after + 5, `hold ${i}: PTTL ${ttl} read ${after.toFixed(0)} ms after acquire()`)
    }
  })

  test('release() when another holder now has the key: false, their key untouched', async () => {
    const key = freshKey('taken-over')
    const s = service(key, 3000)
    assert.equal(await s.acquire(), true)
    await probe.set(key, 'the-new-holder', 'PX', 10_000)
    assert.equal(await s.release(), false)
    assert.equal(await probe.get(key), 'the-new-holder')
    const pttl = await probe.pttl(key)
    assert.ok(pttl > 9000 && pttl <= 10_000, `their PTTL ${pttl}`)
    assert.equal(s.getStatus().isLocked, false)
    assert.equal(await s.release(), true, 'nothing is held any more')
    assert.equal(await probe.get(key), 'the-new-holder')
  })

  test('getStatus(), getLockKey(), getLockTtl() before and after acquire and release', async () => {
    const key = freshKey('status')
    const s = service(key, 1200)
    const expect = (locked) => ({
      lockKey: key,
      lockValue: s.lockValue,
      ttl: 1200,
      isLocked: locked,
      hasAutoRefresh: locked,
      cacheConnected: undefined,
      hasCacheLayer: true,
    })
    assert.deepEqual(Object.keys(s.getStatus()), ['lockKey', 'lockValue', 'ttl', 'isLocked', 'hasAutoRefresh', 'cacheConnected', 'hasCacheLayer'])
    assert.deepEqual(s.getStatus(), expect(false))
    assert.equal(s.getLockKey(), key)
    assert.equal(s.getLockTtl(), 1200)
    assert.equal(await s.acquire(), true)
    assert.deepEqual(s.getStatus(), expect(true))
    assert.equal(s.isLocked, true)
    assert.equal(await s.acquire(), true, 'acquire() while holding')
    assert.equal(await s.release(), true)
    assert.deepEqual(s.getStatus(), expect(false))
    assert.match(s.getStatus().lockValue, UUID_V4)
    assert.equal(s.getLockTtl(), 1200)
    // The same instance can take the lock again, with the same value.
    assert.equal(await s.acquire(), true)
    assert.equal(await probe.get(key), s.lockValue)
    assert.equal(await s.release(), true)
  })
})

describe('a lost lock', () => {
  test('deleted while held: isLocked and hasAutoRefresh turn false within ~ttl/3', async () => {
    const key = freshKey('lost')
    const s = service(key, 900)
    assert.equal(await s.acquire(), true)
    await sleep(100)
    await probe.del(key)
    const deletedAt = performance.now()
    while (s.getStatus().isLocked && performance.now() - deletedAt < 3000) await sleep(10)
    const noticed = performance.now() - deletedAt
    assert.equal(s.getStatus().isLocked, false, 'the loss was never noticed')
    assert.equal(s.getStatus().hasAutoRefresh, false)
    assert.ok(noticed < 800, `noticed ${noticed.toFixed(0)} ms after the delete`)
    await sleep(400)
    assert.equal(await probe.exists(key), 0, 'the lost lock was re-created')
    assert.equal(await s.release(), true, 'release() after a loss, with the key gone')
  })

  test('options.onLost is called once, with the service and an ELOST error, when a refresh finds the lock gone', async () => {
    const key = freshKey('on-lost')
    const told = []
    const s = new DistributedLockService(key, 600, backend.url, { onLost: (service, err) => told.push({ service, err }) })
    services.add(s)
    assert.equal(await s.acquire(), true)
    await probe.del(key)
    const deletedAt = performance.now()
    while (told.length === 0 && performance.now() - deletedAt < 3000) await sleep(10)
    assert.equal(told.length, 1, 'onLost was not called')
    assert.equal(told[0].service, s)
    assert.equal(told[0].err.code, 'ELOST')
    assert.equal(told[0].err.name, 'LockLostError')
    assert.equal(s.getStatus().isLocked, false, 'isLocked is false by the time onLost runs')
    await sleep(500)
    assert.equal(told.length, 1, 'onLost was called more than once')
    assert.throws(() => new DistributedLockService(key, 600, backend.url, { onLost: 5 }), /options\.onLost/)
  })

  redisOnly('a process whose lock was lost is no longer kept alive by it', async () => {
    const key = freshKey('lost-child')
    let heldAt = null
    const run = runChild('service-hold.js', { LOCK_KEY: key, LOCK_TTL: '600' }, {
      onLine: ({ line, at }) => {
        if (line.startsWith('held ')) heldAt = at
      },
    })
    while (heldAt === null && run.proc.exitCode === null) await sleep(10)
    assert.ok(heldAt !== null, `the child never held the lock: ${run.stderr()}`)
    await sleep(1200) // two TTLs: only the refresh keeps it
    assert.equal(run.proc.exitCode, null, 'a holder exited with its lock held')
    assert.equal(run.proc.signalCode, null)
    const value = await probe.get(key)
    assert.match(value, UUID_V4)
    await probe.del(key)
    const deletedAt = performance.now()
    let timer
    const exit = await Promise.race([run.done, new Promise((resolve) => { timer = setTimeout(resolve, 4000, null) })])
    clearTimeout(timer)
    assert.ok(exit, 'the process stayed alive after losing its lock')
    assert.equal(exit.code, 0, exit.stderr)
    const lingered = exit.at - deletedAt
    assert.ok(lingered < 1500, `exited ${lingered.toFixed(0)} ms after the loss`)
    const last = exit.lines.find(({ line }) => line.startsWith('exit '))
    assert.ok(last, JSON.stringify(exit.lines))
    const status = JSON.parse(last.line.slice('exit '.length))
    assert.equal(status.isLocked, false)
    assert.equal(status.hasAutoRefresh, false)
    assert.equal(status.lockValue, value)
    assert.equal(await probe.exists(key), 0)
  })
})

describe('disconnect()', () => {
  redisOnly('releases the lock, then disconnects a connected node-redis client', async () => {
    const key = freshKey('disconnect-node-redis')
    const client = createClient({ url: backend.url })
    clients.push(client)
    await client.connect()
    const s = service(key, 2000, client)
    assert.equal(await s.acquire(), true)
    assert.equal(await client.get(key), s.lockValue)
    await s.disconnect()
    assert.equal(client.isOpen, false, 'the cache client is still open')
    assert.equal(await probe.exists(key), 0, 'the lock outlived disconnect()')
    assert.equal(s.getStatus().isLocked, false)
  })

  redisOnly('calls cacheInstance.disconnect() once, after the release', async () => {
    const key = freshKey('disconnect-spy')
    const cache = fakeMaestroCache({ connected: true })
    const existsAtDisconnect = []
    cache.disconnect = async () => {
      existsAtDisconnect.push(await probe.exists(key))
    }
    const s = service(key, 2000, cache)
    assert.equal(await s.acquire(), true)
    assert.equal(await probe.exists(key), 1)
    await s.disconnect()
    assert.deepEqual(existsAtDisconnect, [0])
    assert.equal(await probe.exists(key), 0)
  })
})

describe('a key it does not own', () => {
  redisOnly('acquire(…, 200) while another value sits at lockKey: false, value and TTL unchanged', async () => {
    const key = freshKey('foreign')
    await probe.set(key, 'not-ours', 'PX', 5000)
    const s = service(key, 1000)
    const watch = await watchKey(key)
    const before = await probe.pttl(key)
    const started = performance.now()
    assert.equal(await s.acquire(1000, 200), false)
    const elapsed = performance.now() - started
    assert.equal(await s.release(), true)
    await s.disconnect()
    const after = await probe.pttl(key)
    const seen = await watch.stop()
    assert.equal(await probe.get(key), 'not-ours')
    assert.ok(after <= before && after >= before - elapsed - 300, `PTTL went from ${before} to ${after}`)
    // Nothing but read-only commands and SET NX attempts ever reached the key.
    const writes = seen.filter(({ args }) => {
      const command = args[0].toUpperCase()
      if (['GET', 'PTTL', 'TTL', 'EXISTS', 'EVAL', 'EVALSHA'].includes(command)) return false
      return !(command === 'SET' && args.includes('NX'))
    })
    assert.deepEqual(writes, [])
    assert.ok(attemptsOf(seen, key, 'not-ours').length >= 1, 'MONITOR saw no attempt: the check above proves nothing')
  })
})
