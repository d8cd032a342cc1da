'use strict'

// Fault suite, scenario "hostile input": every kind of bad or awkward key and TTL a caller
// (or an attacker who controls a key) can hand to DistributedLock (acquire, tryAcquire,
// waitForLock, isLocked) and to ExclusiveLock's `name`.
//
//   - Each invalid value is rejected before any Redis call (a MONITOR connection sees only
//     our own markers), within one tick (before a setImmediate queued ahead of the call),
//     with a TypeError or RangeError, code EINVAL, that names the argument. ExclusiveLock
//     keeps the original's ajv-style `Error('Input validation failed')` for schema failures.
//   - Each binary-safe key (1 MB, NUL, unicode, newlines, glob, braces, RESP framing, ...) is
//     locked byte-exact: the Redis key holds exactly `'lock:' + key` as ioredis would encode
//     it, and its value is the handle's token.
//   - 0 crashes (also in a child process that makes every hostile call, including straight
//     into the native binding, and must exit 0 on its own), 0 hangs (every call settles
//     within 1 s), 0 coercions (no `lock:null`, `lock:[object Object]`, ... and no
//     toString/valueOf/Proxy trap of a hostile object is ever invoked).
//
// Input tests that are not about hostility (option shapes, extend, using) are in
// __test__/input.test.js. This file runs itself as the child when NRL_HOSTILE_CHILD is set.
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')
const MiB = 1024 * 1024
const HANG_MS = 1000
const ONE_TICK_MS = 5
const KEY = 'hostile:ttl' // the key of the TTL cases; never reaches Redis

/** An object that records every attempt to turn it into a primitive. */
function coercionSpy(log) {
  return {
    toString() {
      log.push('toString')
      return 'k'
    },
    valueOf() {
      log.push('valueOf')
      return 1000
    },
    [Symbol.toPrimitive](hint) {
      log.push(`toPrimitive(${hint})`)
      return hint === 'number' ? 1000 : 'k'
    },
    toJSON() {
      log.push('toJSON')
      return 'k'
    },
  }
}

/** A Proxy that records every trap the library triggers on it (it should trigger none). */
function trapSpy(log) {
  const handler = new Proxy(
    {},
    {
      get(_, trap) {
        log.push(`trap ${String(trap)}`)
        return Reflect[trap]
      },
    },
  )
  return new Proxy({}, handler)
}

/** `[label, value, ErrorClass]`: keys every method must reject. */
function invalidKeys(log) {
  return [
    ["''", '', TypeError],
    ['null', null, TypeError],
    ['undefined', undefined, TypeError],
    ['NaN', NaN, TypeError],
    ['{}', {}, TypeError],
    ['[]', [], TypeError],
    ['Symbol()', Symbol(), TypeError],
    ['10n', 10n, TypeError],
    ['true', true, TypeError],
    ['false', false, TypeError],
    ['0', 0, TypeError],
    ['42', 42, TypeError],
    // Beyond the obvious: values that stringify to a perfectly good key.
    ["new String('k')", new String('k'), TypeError],
    ["['k']", ['k'], TypeError],
    ['an object with toString/valueOf/toPrimitive', coercionSpy(log), TypeError],
    ['a Proxy', trapSpy(log), TypeError],
    // 2 M characters, but 4 MiB + 1 bytes: the bound is in bytes, as Redis counts.
    ['4 MiB + 1 byte of 2-byte characters', 'é'.repeat(2 * MiB) + 'k', RangeError],
  ]
}

/** `[label, value, ErrorClass]`: TTLs acquire / tryAcquire / waitForLock must reject. */
function invalidTtls(log) {
  return [
    ['0', 0, RangeError],
    ['-1', -1, RangeError],
    ['-0', -0, RangeError],
    ['NaN', NaN, RangeError],
    ['Infinity', Infinity, RangeError],
    ['-Infinity', -Infinity, RangeError],
    ['1e21', 1e21, RangeError],
    ['2**53', 2 ** 53, RangeError],
    ["'1000'", '1000', TypeError],
    ['{}', {}, TypeError],
    ['[]', [], TypeError],
    ['null', null, TypeError],
    ['true', true, TypeError],
    ['1.5', 1.5, RangeError],
    ['2**31', 2 ** 31, RangeError],
    // Beyond the obvious.
    ['Number.MIN_VALUE (subnormal)', Number.MIN_VALUE, RangeError],
    ['Number.MAX_VALUE', Number.MAX_VALUE, RangeError],
    ['-(2**31)', -(2 ** 31), RangeError],
    ['2**31 - 0.5', 2 ** 31 - 0.5, RangeError],
    ['2**32 + 1000 (wraps to 1000 as a u32)', 2 ** 32 + 1000, RangeError],
    ['new Number(1000)', new Number(1000), TypeError],
    ['1000n', 1000n, TypeError],
    ['Symbol()', Symbol(), TypeError],
    ['an object with valueOf', coercionSpy(log), TypeError],
  ]
}

/** `[label, key]`: keys that are valid and must be stored byte for byte. */
function binaryKeys() {
  return [
    ['1 MB', 'k'.repeat(1_000_000)],
    ['NUL bytes', 'nul\0in\0key\0'],
    ['unicode', 'ключ🔒'],
    ['newlines', 'line1\nline2\r\nline3'],
    ['glob characters', '*?[a-z]\\'],
    ['{hash} braces', '{hash}:braces'],
    // Beyond the obvious.
    ['RESP framing', 'k\r\n*1\r\n$8\r\nFLUSHALL\r\n'],
    ['a } without a hash tag', 'a}b{c'],
    ['another lock key', 'lock:nested'],
    ['__proto__', '__proto__'],
    ['a single space', ' '],
    ['a lone surrogate (encoded as U+FFFD, as ioredis does)', 'lone\uD800'],
  ]
}

/** Names that the original slugs (`/[\s\W]+/g` -> `-`) and that must land exactly there. */
const slug = (name) => name.replace(/[\s\W]+/g, '-')

/**
 * Runs `call()` and reports how it settled: `threw` (synchronously), `returned` (a
 * non-promise), `resolved`, `rejected`, or `hang` (not within HANG_MS). `beforeImmediate`
 * is true when it settled before a setImmediate queued just before the call fired, i.e.
 * within the same turn of the event loop.
 */
function observe(call) {
  return new Promise((resolve) => {
    let immediateFired = false
    setImmediate(() => {
      immediateFired = true
    })
    let settled = false
    const started = performance.now()
    const timer = setTimeout(() => finish('hang'), HANG_MS)
    function finish(kind, value) {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve({ kind, value, ms: performance.now() - started, beforeImmediate: !immediateFired })
    }
    let result
    try {
      result = call()
    } catch (err) {
      finish('threw', err)
      return
    }
    if (result instanceof Promise) {
      result.then(
        (value) => finish('resolved', value),
        (err) => finish('rejected', err),
      )
    } else {
      finish('returned', result)
    }
  })
}

function distributedCalls(lock) {
  return {
    key: {
      acquire: (key) => lock.acquire(key),
      'acquire with ttlMs': (key) => lock.acquire(key, 1000),
      tryAcquire: (key) => lock.tryAcquire(key, 1000),
      waitForLock: (key) => lock.waitForLock(key, 1000, 1000),
      isLocked: (key) => lock.isLocked(key),
    },
    ttl: {
      acquire: (ttl) => lock.acquire(KEY, ttl),
      tryAcquire: (ttl) => lock.tryAcquire(KEY, ttl),
      waitForLock: (ttl) => lock.waitForLock(KEY, 1000, ttl),
    },
  }
}

function newExclusive(ExclusiveLock, url, name) {
  return new ExclusiveLock({ name, cache_connection: url })
}

// -----------------------------------------------------------------------------------------
// The child: every hostile call, then a natural exit. Prints one JSON line.
// -----------------------------------------------------------------------------------------

async function child(url) {
  const { DistributedLock, ExclusiveLock } = require(ROOT)
  const log = []
  const lock = new DistributedLock(url)
  const calls = distributedCalls(lock)
  const report = { calls: 0, rejected: 0, hangs: 0, unexpected: [], native: 0, nativeHangs: 0, locked: 0 }
  const expect = async (label, call, kinds) => {
    report.calls++
    const outcome = await observe(call)
    if (outcome.kind === 'hang') report.hangs++
    if (kinds.includes(outcome.kind) && outcome.value?.code === 'EINVAL') report.rejected++
    else report.unexpected.push(`${label}: ${outcome.kind} ${outcome.value?.code ?? ''}`)
  }
  for (const [label, key] of invalidKeys(log)) {
    for (const [method, call] of Object.entries(calls.key)) await expect(`${method}(${label})`, () => call(key), ['rejected'])
    await expect(`ExclusiveLock(${label})`, () => newExclusive(ExclusiveLock, url, key), ['threw'])
  }
  for (const [label, ttl] of invalidTtls(log)) {
    for (const [method, call] of Object.entries(calls.ttl)) await expect(`${method}(ttl ${label})`, () => call(ttl), ['rejected'])
  }
  for (const [label, key] of binaryKeys()) {
    const outcome = await observe(() => lock.acquire(key, 5000))
    if (outcome.kind !== 'resolved') report.unexpected.push(`acquire(${label}): ${outcome.kind}`)
    else {
      report.locked++
      await outcome.value.release()
    }
  }
  await nativeCalls(url, report)
  if (log.length > 0) report.unexpected.push(`coerced: ${log.join(', ')}`)
  process.stdout.write(`${JSON.stringify(report)}\n`)
  // No process.exit: the child must also exit on its own (nothing left keeps it alive).
}

/**
 * Hostile calls straight into the native binding, past the JS layer's type checks: each
 * must throw or settle, never abort the process (a Rust panic across napi would). The
 * binding is private and changes shape, so this walks whatever it exports: every class is
 * constructed from plausible parts, then every method and getter is called with hostile
 * argument lists, on a real instance and on a foreign `this`.
 */
async function nativeCalls(url, report) {
  const native = require(path.join(ROOT, 'binding.js'))
  const attempt = async (call) => {
    report.native++
    const outcome = await observe(call)
    if (outcome.kind === 'hang') report.nativeHangs++
    const value = outcome.value
    if (outcome.kind === 'resolved' && value !== null && typeof value === 'object' && typeof value.release === 'function') {
      await observe(() => value.release())
    }
    return outcome
  }
  const classes = Object.entries(native).filter(([name, v]) => typeof v === 'function' && /^Native/.test(name))
  const functions = Object.entries(native).filter(([name, v]) => typeof v === 'function' && !/^Native/.test(name))
  const huge = 'x'.repeat(5 * MiB)
  const hostileArgs = [
    [],
    [undefined],
    [null],
    [NaN],
    [{}],
    [[]],
    [Symbol('s')],
    [10n],
    [huge],
    Array(6).fill(-1),
    Array(6).fill(NaN),
    Array(6).fill(Infinity),
    Array(6).fill(2 ** 64),
    Array(6).fill(''),
    Array(6).fill({}),
    Array(6).fill(null),
    Array(6).fill(huge),
    [-1, '', -0, NaN, 'x', () => {}],
    [1.5, '\0', 1e300, {}, [], Symbol('s')],
  ]
  // Parts a constructor may want, in any order; whatever builds becomes a target.
  const plain = () => {}
  const parts = {
    connection: [{ url }, { url: 'redis://u:p@[::1' }, { port: -1 }, { url, connectTimeoutMs: NaN }],
    options: [
      {},
      { maxRetries: 1e300, defaultTtlMs: -0, retryDelayMs: -Infinity },
      { name: 'native', keyPrefix: 'p', lockContents: '1', lockTtlMs: 3000, lockRefreshMs: 1000, maxStallMs: 0 },
      { name: huge, keyPrefix: 'p', lockContents: '1', lockTtlMs: NaN, lockRefreshMs: 1e300, maxStallMs: -1 },
      { lockKey: 'native-svc', ttlMs: 1000, retryDelayMs: 0, maxBackoffMs: 0, maxStallMs: 0 },
      { lockKey: '', ttlMs: NaN, retryDelayMs: -1, maxBackoffMs: Infinity, maxStallMs: NaN },
    ],
  }
  const instances = []
  const tryBuild = async (Class, args) => {
    const outcome = await attempt(() => new Class(...args))
    const built = outcome.kind === 'returned' && outcome.value instanceof Class
    // Two of a kind are enough targets (every method gets every hostile list).
    if (built && instances.filter((i) => i instanceof Class).length < 2) instances.push(outcome.value)
  }
  // Classes that take nothing (or a callback) first, so the others can be handed one.
  // syncguard's lock() options as lib/syncguard/lock.js hands them over (NativePace).
  const pace = { maxRetries: 3, retryDelayMs: 100, backoff: 'exponential', jitter: 'equal', timeoutMs: 5000 }
  for (const [, Class] of classes) {
    await tryBuild(Class, [])
    await tryBuild(Class, [plain])
    await tryBuild(Class, [pace])
  }
  const of = (name) => instances.filter((i) => i.constructor.name === name)
  const extras = [...of('NativeHeartbeat').slice(0, 1), ...of('NativeCompletions').slice(0, 1)]
  // Then those made from connection settings (a NativeConnection), so the lock classes can be
  // handed one of them as well as hostile settings.
  for (const [, Class] of classes) {
    for (const connection of parts.connection) await tryBuild(Class, [connection, ...of('NativeCompletions').slice(0, 1)])
  }
  const connections = [...parts.connection, ...of('NativeConnection')]
  for (const [, Class] of classes) {
    for (const connection of connections) {
      for (const options of parts.options) await tryBuild(Class, [connection, options, ...extras])
    }
    for (const args of hostileArgs) await tryBuild(Class, args)
  }
  for (const [, fn] of functions) {
    for (const args of hostileArgs) await attempt(() => fn(...args))
    await attempt(() => fn({ url }))
  }
  for (const instance of instances) {
    const proto = Object.getPrototypeOf(instance)
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === 'constructor') continue
      const descriptor = Object.getOwnPropertyDescriptor(proto, name)
      if (descriptor.get) {
        await attempt(() => descriptor.get.call(instance))
        await attempt(() => descriptor.get.call({}))
        continue
      }
      if (typeof descriptor.value !== 'function') continue
      await attempt(() => descriptor.value.call({}))
      await attempt(() => descriptor.value.call(null, 'x'))
      for (const args of hostileArgs) await attempt(() => descriptor.value.apply(instance, args))
    }
  }
  report.nativeClasses = classes.length
  report.nativeBuilt = new Set(instances.map((i) => i.constructor.name)).size
}

if (process.env.NRL_HOSTILE_CHILD) {
  child(process.env.NRL_HOSTILE_CHILD).catch((err) => {
    process.stderr.write(`${err?.stack ?? err}\n`)
    process.exitCode = 1
  })
} else {
  suite()
}

// -----------------------------------------------------------------------------------------
// The suite
// -----------------------------------------------------------------------------------------

function suite() {
  const { spawn } = require('node:child_process')
  const { test, before, after } = require('node:test')
  const assert = require('node:assert/strict')
  const Redis = require('ioredis')
  const { startRedis } = require('../helpers/redis-server')
  const { record } = require('./figures')
  const { DistributedLock, ExclusiveLock, LockHandle } = require(ROOT)

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

  let server
  let redis // admin client: markers and read-back
  let monitor
  let lock
  let calls
  const seen = [] // what MONITOR reported: { args }
  let markerCount = 0
  const coercionLog = [] // every toString / valueOf / Proxy trap a hostile value saw
  const figures = {
    cases: 0,
    calls: 0,
    rejected: 0,
    lockedByteExact: 0,
    exclusiveByteExact: 0,
    hangs: 0,
    slowestRejectionMs: 0,
    slowestRejection: '',
  }

  const isMarker = (e) => String(e.args[0]).toLowerCase() === 'echo' && String(e.args[1]).startsWith('hostile-marker-')

  /** Echoes a marker and waits until MONITOR reports it; returns the index past it. */
  async function sync() {
    const marker = `hostile-marker-${++markerCount}`
    await redis.echo(marker)
    const deadline = Date.now() + 3000
    for (;;) {
      const at = seen.findIndex((e) => isMarker(e) && e.args[1] === marker)
      if (at !== -1) return at + 1
      if (Date.now() > deadline) throw new Error(`MONITOR never reported ${marker}`)
      await sleep(5)
    }
  }

  /** Runs `fn` and asserts that Redis received nothing but our markers meanwhile. */
  async function quiet(fn) {
    const start = await sync()
    await fn()
    await sleep(30) // a leaked command could arrive just after its call rejected
    const end = await sync()
    const others = seen.slice(start, end).filter((e) => !isMarker(e))
    assert.deepEqual(
      others.map((e) => e.args.map((a) => String(a).slice(0, 60))),
      [],
      'commands reached Redis during hostile calls',
    )
  }

  function checkInvalid(what, err, Class, argument) {
    assert.ok(err instanceof Class, `${what}: expected ${Class.name}, got ${err?.name}: ${err?.message}`)
    assert.equal(err.code, 'EINVAL', `${what}: code`)
    assert.equal(err.argument, argument, `${what}: argument`)
    assert.ok(err.message.includes(argument), `${what}: message ${JSON.stringify(err.message)} does not name ${argument}`)
    // Never echoes a huge input; tiny and huge numbers print in full today (about 330 digits).
    assert.ok(err.message.length < 500, `${what}: message of ${err.message.length} characters`)
  }

  /** ExclusiveLock reports schema failures as the original does (ajv), native ones as TypeError/RangeError. */
  function checkInvalidName(what, err) {
    assert.ok(err instanceof Error, `${what}: threw ${typeof err}`)
    assert.equal(err.code, 'EINVAL', `${what}: code`)
    if (err instanceof TypeError || err instanceof RangeError) {
      assert.equal(err.argument, 'name', `${what}: argument`)
      assert.ok(err.message.includes('name'), `${what}: message ${JSON.stringify(err.message)}`)
    } else {
      assert.equal(err.message, 'Input validation failed', what)
      const [first] = err.errors
      assert.ok(first.instancePath === '/name' || first.message.includes("'name'"), `${what}: ${JSON.stringify(err.errors)}`)
    }
  }

  /** One hostile call that must be rejected at once, before Redis, naming `argument`. */
  async function expectRejected(what, call, Class, argument, settle = 'rejected') {
    figures.calls++
    const outcome = await observe(call)
    if (outcome.kind === 'hang') figures.hangs++
    assert.equal(outcome.kind, settle, `${what}: ${outcome.kind} (${outcome.value?.message ?? outcome.value})`)
    if (Class) checkInvalid(what, outcome.value, Class, argument)
    else checkInvalidName(what, outcome.value)
    assert.ok(
      outcome.beforeImmediate || outcome.ms < ONE_TICK_MS,
      `${what}: settled after a setImmediate, ${outcome.ms.toFixed(2)} ms after the call`,
    )
    if (outcome.ms > figures.slowestRejectionMs) {
      figures.slowestRejectionMs = outcome.ms
      figures.slowestRejection = what
    }
  }

  before(async () => {
    server = await startRedis()
    redis = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, maxRetriesPerRequest: 1 })
    await redis.connect()
    lock = new DistributedLock(server.url)
    calls = distributedCalls(lock)
    // Open the lock's connection first, so its handshake is not taken for a leaked call.
    assert.equal(await lock.isLocked('warm-up'), false)
    monitor = await redis.monitor()
    monitor.on('monitor', (time, args) => seen.push({ args }))
    await quiet(async () => {})
  })

  after(async () => {
    monitor?.disconnect()
    redis?.disconnect()
    await server?.close()
  })

  test('invalid keys: every method rejects at once, before Redis, naming key', async () => {
    const cases = invalidKeys(coercionLog)
    await quiet(async () => {
      for (const [label, key, Class] of cases) {
        for (const [method, call] of Object.entries(calls.key)) {
          await expectRejected(`${method}(${label})`, () => call(key), Class, 'key')
        }
        figures.rejected++
      }
    })
    figures.cases += cases.length
  })

  test('invalid TTLs: acquire, tryAcquire and waitForLock reject at once, before Redis, naming ttlMs', async () => {
    const cases = invalidTtls(coercionLog)
    await quiet(async () => {
      for (const [label, ttl, Class] of cases) {
        for (const [method, call] of Object.entries(calls.ttl)) {
          await expectRejected(`${method}(ttlMs ${label})`, () => call(ttl), Class, 'ttlMs')
        }
        figures.rejected++
      }
    })
    figures.cases += cases.length
  })

  test('invalid ExclusiveLock names: the constructor throws at once, before Redis, naming name', async () => {
    // The same hostile keys, as names (counted once, with the keys).
    await quiet(async () => {
      for (const [label, name] of invalidKeys(coercionLog)) {
        await expectRejected(`new ExclusiveLock({ name: ${label} })`, () => newExclusive(ExclusiveLock, server.url, name), null, 'name', 'threw')
      }
    })
  })

  test('no hostile value was coerced, and nothing was written', async () => {
    assert.deepEqual(coercionLog, [], 'a hostile value was converted or inspected')
    assert.equal(await redis.dbsize(), 0)
    const coerced = ['', 'null', 'undefined', '[object Object]', 'NaN', '0', '42', 'true', 'false', '10', 'Symbol()', 'k', '1000']
    const names = [...coerced.map((c) => `lock:${c}`), ...coerced.map((c) => `exclusive-lock:${slug(c)}`)]
    for (const name of names) assert.equal(await redis.exists(name), 0, `${JSON.stringify(name)} exists`)
  })

  test('binary-safe keys are locked byte-exact by every acquiring method', async () => {
    const sentinel = await lock.acquire('hostile:sentinel', 30_000)
    const methods = {
      acquire: (key) => lock.acquire(key, 10_000),
      tryAcquire: (key) => lock.tryAcquire(key, 10_000),
      waitForLock: (key) => lock.waitForLock(key, 1000, 10_000),
    }
    const cases = binaryKeys()
    for (const [label, key] of cases) {
      const redisKey = Buffer.from(`lock:${key}`) // UTF-8, as ioredis (and so the original) writes it
      for (const [method, call] of Object.entries(methods)) {
        const what = `${method}(${label})`
        figures.calls++
        const outcome = await observe(() => call(key))
        if (outcome.kind === 'hang') figures.hangs++
        assert.equal(outcome.kind, 'resolved', `${what}: ${outcome.kind} ${outcome.value?.message ?? ''}`)
        const handle = outcome.value
        assert.ok(handle instanceof LockHandle, `${what}: ${handle}`)
        try {
          // The key round-trips through UTF-8 (a lone surrogate becomes U+FFFD, as in ioredis).
          assert.equal(handle.key, Buffer.from(key).toString(), `${what}: handle.key`)
          const stored = await redis.getBuffer(redisKey)
          assert.ok(stored !== null, `${what}: nothing at the exact key bytes`)
          assert.ok(stored.equals(Buffer.from(handle.token)), `${what}: value is not the token`)
          const pttl = await redis.pttl(redisKey)
          assert.ok(pttl > 0 && pttl <= 10_000, `${what}: PTTL ${pttl}`)
          assert.equal(await lock.isLocked(key), true, `${what}: isLocked`)
          assert.equal(await lock.tryAcquire(key, 1000), null, `${what}: a second holder got it`)
        } finally {
          await handle.release()
        }
        assert.equal(await redis.exists(redisKey), 0, `${what}: not released`)
        assert.equal(await lock.isLocked(key), false, `${what}: isLocked after release`)
      }
      figures.lockedByteExact++
    }
    figures.cases += cases.length
    // The RESP-framing key did not smuggle a command in: the sentinel is still there.
    assert.equal(await redis.get('lock:hostile:sentinel'), sentinel.token)
    await sentinel.release()
  })

  test('binary-safe ExclusiveLock names land exactly where the original puts them', async () => {
    for (const [label, name] of binaryKeys()) {
      const what = `ExclusiveLock(${label})`
      const ex = newExclusive(ExclusiveLock, server.url, name)
      const expected = `exclusive-lock:${slug(name)}`
      assert.equal(ex.key, expected, `${what}: key`)
      figures.calls++
      const outcome = await observe(() => ex.acquire())
      if (outcome.kind === 'hang') figures.hangs++
      try {
        assert.equal(outcome.kind, 'resolved', `${what}: ${outcome.kind} ${outcome.value?.message ?? ''}`)
        assert.equal(outcome.value, true, `${what}: not acquired`)
        const stored = await redis.getBuffer(Buffer.from(expected))
        assert.ok(stored?.equals(Buffer.from('1')), `${what}: lock_contents at the slugged key`)
      } finally {
        await ex.release()
      }
      assert.equal(await redis.exists(expected), 0, `${what}: not released`)
      figures.exclusiveByteExact++
    }
  })

  test('nothing but fencing counters (and counts of fences drawn in vain, which expire) is left behind', async () => {
    const keys = await redis.keysBuffer('*')
    // `{<key>}\xff<kind>` for an untagged key, `{<tag>}\xff<kind>\xff<key>` for a tagged one.
    const sibling = (kind) => (k) => k.endsWith(`}\xff${kind}`) || new RegExp(`^\\{[^}]*\\}\\xff${kind}\\xff`).test(k)
    const [fence, missed] = [sibling('fence'), sibling('missed')]
    const strays = keys.map((k) => k.toString('latin1')).filter((k) => !fence(k) && !missed(k))
    assert.deepEqual(strays.map((k) => k.slice(0, 80)), [])
    for (const key of keys.filter((k) => missed(k.toString('latin1')))) {
      const pttl = await redis.pttl(key)
      assert.ok(pttl > 0 && pttl <= 600_000, `a count of fences drawn in vain lives at most 10 min: ${pttl}`)
    }
  })

  test('the TTL bounds themselves are honoured: 1 ms and 2**31 - 1 ms', async () => {
    const longest = await lock.acquire('hostile:longest', 2 ** 31 - 1)
    try {
      const pttl = await redis.pttl('lock:hostile:longest')
      assert.ok(pttl > 2 ** 31 - 1 - 5000 && pttl <= 2 ** 31 - 1, `PTTL ${pttl}`)
    } finally {
      await longest.release()
    }
    const shortest = await lock.acquire('hostile:shortest', 1)
    await sleep(20)
    assert.equal(await lock.isLocked('hostile:shortest'), false, 'a 1 ms lock outlived its TTL')
    assert.equal(shortest.isHeld, false)
    await shortest.release()
  })

  test('a child process making every hostile call (JS API and raw binding) exits 0 on its own', async () => {
    const started = performance.now()
    const childProcess = spawn(process.execPath, [__filename], {
      env: { ...process.env, NRL_HOSTILE_CHILD: server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    childProcess.stdout.on('data', (d) => (stdout += d))
    childProcess.stderr.on('data', (d) => (stderr += d))
    const exit = new Promise((resolve) => childProcess.once('exit', (code, signal) => resolve({ code, signal })))
    const timer = setTimeout(() => childProcess.kill('SIGKILL'), 30_000)
    const { code, signal } = await exit
    clearTimeout(timer)
    const elapsed = performance.now() - started
    assert.equal(signal, null, `child killed by ${signal} after ${elapsed.toFixed(0)} ms; stderr: ${stderr}`)
    assert.equal(code, 0, `child exited ${code}; stderr: ${stderr}`)
    const report = JSON.parse(stdout.trim().split('\n').pop())
    assert.deepEqual(report.unexpected, [])
    assert.equal(report.hangs, 0)
    assert.equal(report.nativeHangs, 0)
    assert.equal(report.rejected, report.calls)
    assert.equal(report.locked, binaryKeys().length)
    // Every class but NativeLockHandle (made only by an acquisition) was built and attacked.
    assert.ok(report.nativeBuilt >= report.nativeClasses - 1, `built ${report.nativeBuilt} of ${report.nativeClasses} native classes`)
    assert.ok(report.native > 200, `only ${report.native} native calls`)
    figures.calls += report.calls + report.native
  })

  test('figures', () => {
    // Recorded only when every case above ran to the end.
    assert.equal(figures.rejected, invalidKeys([]).length + invalidTtls([]).length)
    assert.equal(figures.lockedByteExact, binaryKeys().length)
    assert.equal(figures.exclusiveByteExact, binaryKeys().length)
    assert.equal(figures.hangs, 0)
    assert.deepEqual(coercionLog, [])
    record('hostile-input', 'Hostile input', {
      cases: figures.cases,
      calls: figures.calls,
      rejected: figures.rejected,
      lockedByteExact: figures.lockedByteExact,
      exclusiveByteExact: figures.exclusiveByteExact,
      crashes: 0, // this process and the child both survived (the tests above)
      hangs: figures.hangs,
      coercions: coercionLog.length,
      slowestRejectionMs: Number(figures.slowestRejectionMs.toFixed(2)),
      slowestRejection: figures.slowestRejection.slice(0, 60),
    })
  })

  test(
    "a key named '<k>:fence' is not blocked by the fencing counter of '<k>'",
    async () => {
      const first = await lock.acquire('{todo}', 10_000)
      await first.release()
      const second = await lock.tryAcquire('{todo}:fence', 10_000)
      assert.ok(second, "'{todo}:fence' stays locked forever once '{todo}' was ever locked")
      await second.release()
    },
  )

  test(
    'a port or db beyond 32 bits is rejected, not wrapped around',
    () => {
      assert.throws(() => new DistributedLock({ host: '127.0.0.1', port: 2 ** 32 + server.port }), { code: 'EINVAL' })
      assert.throws(() => new DistributedLock({ host: '127.0.0.1', port: server.port, db: 2 ** 32 + 1 }), { code: 'EINVAL' })
    },
  )
}
