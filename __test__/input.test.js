'use strict'

// Bad input is rejected before any Redis call, names the argument, and writes nothing.
// A MONITOR connection watches everything the server receives while the bad calls run.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { DistributedLock, LockHandle } = require('..')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// "At once": MONITOR shows no Redis call was made; this bounds any local wait instead, at a
// fifth of the shortest it could be (a timeout, 5000 ms by default), above the stalls of a
// loaded 2-core machine (about 300 ms seen, beside a CPU hog and other builds).
const AT_ONCE_MS = 1000

let server
let redis // admin client (db 0)
let monitor // MONITOR connection
let lock // the instance the bad calls go to (db 0)
let lockDb1 // for the few calls that must succeed (a handle to extend), kept out of db 0
const seen = [] // every command the monitor reported: { args, source, database }
let markerCount = 0

const isMarker = (e) => e.args[0]?.toLowerCase() === 'echo' && String(e.args[1]).startsWith('marker-')

/**
 * Sends a marker through the admin client and waits until the monitor reports it: every
 * command Redis received before the marker has been reported by then. Returns the index in
 * `seen` just past the marker.
 */
async function sync() {
  const marker = `marker-${++markerCount}`
  await redis.echo(marker)
  const deadline = Date.now() + 3000
  for (;;) {
    const at = seen.findIndex((e) => isMarker(e) && e.args[1] === marker)
    if (at !== -1) return at + 1
    if (Date.now() > deadline) throw new Error(`monitor never reported ${marker}`)
    await sleep(5)
  }
}

/**
 * Runs `fn` and asserts that Redis received no command meanwhile. A command from a bad call
 * could arrive a little after the call rejected, so we wait a moment before the closing
 * marker.
 */
async function quiet(fn) {
  const start = await sync()
  await fn()
  await sleep(30)
  const end = await sync()
  const others = seen.slice(start, end).filter((e) => !isMarker(e))
  assert.deepEqual(
    others.map((e) => e.args.map((a) => String(a).slice(0, 80))),
    [],
    'commands reached Redis during bad calls',
  )
}

/** A promise that fails instead of hanging. */
function settleWithin(promise, ms, what) {
  let timer
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)
    }),
  ])
}

/**
 * Calls `call()`, which must return (not throw) a promise that rejects within AT_ONCE_MS with
 * an error of `Class`, code EINVAL and `argument`, whose message names the argument.
 */
async function expectInvalid(what, call, Class, argument) {
  const started = performance.now()
  let promise
  assert.doesNotThrow(() => {
    promise = call()
  }, `${what} threw synchronously instead of rejecting`)
  assert.ok(promise instanceof Promise, `${what} did not return a promise`)
  let error
  await settleWithin(
    promise.then(
      () => assert.fail(`${what} resolved`),
      (err) => {
        error = err
      },
    ),
    2000,
    what,
  )
  const elapsed = performance.now() - started
  checkError(what, error, Class, argument)
  assert.ok(elapsed < AT_ONCE_MS, `${what} took ${elapsed.toFixed(1)} ms to reject`)
}

/** Runs a constructor call that must throw synchronously, quickly. */
function expectThrows(what, call, Class, argument) {
  const started = performance.now()
  let error
  try {
    call()
  } catch (err) {
    error = err
  }
  const elapsed = performance.now() - started
  assert.ok(error, `${what} did not throw`)
  checkError(what, error, Class, argument)
  assert.ok(elapsed < AT_ONCE_MS, `${what} took ${elapsed.toFixed(1)} ms to throw`)
  return error
}

function checkError(what, error, Class, argument) {
  assert.ok(error instanceof Class, `${what}: expected ${Class.name}, got ${error?.name}: ${error?.message}`)
  assert.equal(error.code, 'EINVAL', `${what}: code`)
  assert.equal(error.argument, argument, `${what}: argument`)
  assert.equal(typeof error.message, 'string')
  assert.ok(error.message.includes(argument), `${what}: message ${JSON.stringify(error.message)} does not name ${argument}`)
}

function show(value) {
  if (typeof value === 'symbol') return value.toString()
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'function') return 'a function'
  if (Object.is(value, -0)) return '-0'
  if (typeof value === 'string') return JSON.stringify(value)
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

before(async () => {
  server = await startRedis()
  redis = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, maxRetriesPerRequest: 1 })
  await redis.connect()
  lock = new DistributedLock(server.url)
  lockDb1 = new DistributedLock({ host: '127.0.0.1', port: server.port, db: 1 })
  // Open the lock's connection now, so its handshake is not mistaken for a leaked call.
  assert.equal(await lock.isLocked('warm-up'), false)
  assert.equal(await lockDb1.isLocked('warm-up'), false)
  monitor = await redis.monitor()
  monitor.on('monitor', (time, args, source, database) => {
    seen.push({ args, source, database })
  })
  // Make sure the monitor is live before any test relies on it.
  await quiet(async () => {})
})

after(async () => {
  if (monitor) monitor.disconnect()
  if (redis) redis.disconnect()
  if (server) await server.close()
})

const BAD_KEYS = [undefined, null, '', 0, 1, NaN, true, {}, [], Symbol('k'), 10n, () => {}]

describe('keys', () => {
  const methods = {
    acquire: (key) => lock.acquire(key),
    'acquire with ttlMs': (key) => lock.acquire(key, 1000),
    tryAcquire: (key) => lock.tryAcquire(key),
    waitForLock: (key) => lock.waitForLock(key, 1000),
    isLocked: (key) => lock.isLocked(key),
    using: (key) => lock.using(key, () => assert.fail('fn must not run')),
    'using with timeoutMs': (key) => lock.using(key, () => assert.fail('fn must not run'), { timeoutMs: 1000 }),
  }
  for (const [name, call] of Object.entries(methods)) {
    test(`${name} rejects every non-string or empty key with a TypeError naming key`, async () => {
      await quiet(async () => {
        for (const key of BAD_KEYS) {
          await expectInvalid(`${name}(${show(key)})`, () => call(key), TypeError, 'key')
        }
      })
    })
  }

  test('a key over the size bound is a RangeError naming key', async () => {
    const huge = 'k'.repeat(4 * 1024 * 1024 + 1)
    await quiet(async () => {
      await expectInvalid('acquire(huge)', () => lock.acquire(huge), RangeError, 'key')
      await expectInvalid('tryAcquire(huge)', () => lock.tryAcquire(huge), RangeError, 'key')
      await expectInvalid('isLocked(huge)', () => lock.isLocked(huge), RangeError, 'key')
    })
  })
})

const RANGE_BAD_MS = [0, -1, -0, 1.5, NaN, Infinity, -Infinity, 1e21, 2 ** 53, 2 ** 31]
const TYPE_BAD_MS = ['100', {}, null, true]

describe('ttlMs', () => {
  const methods = {
    acquire: (ttl) => lock.acquire('input:ttl', ttl),
    tryAcquire: (ttl) => lock.tryAcquire('input:ttl', ttl),
    waitForLock: (ttl) => lock.waitForLock('input:ttl', 1000, ttl),
    using: (ttl) => lock.using('input:ttl', () => assert.fail('fn must not run'), { ttlMs: ttl }),
    'using with timeoutMs': (ttl) =>
      lock.using('input:ttl', () => assert.fail('fn must not run'), { ttlMs: ttl, timeoutMs: 1000 }),
  }
  for (const [name, call] of Object.entries(methods)) {
    test(`${name}: out-of-range ttlMs is a RangeError naming ttlMs`, async () => {
      await quiet(async () => {
        for (const ttl of RANGE_BAD_MS) {
          await expectInvalid(`${name}(ttlMs ${show(ttl)})`, () => call(ttl), RangeError, 'ttlMs')
        }
      })
    })
    test(`${name}: a non-number ttlMs is a TypeError naming ttlMs`, async () => {
      await quiet(async () => {
        for (const ttl of TYPE_BAD_MS) {
          await expectInvalid(`${name}(ttlMs ${show(ttl)})`, () => call(ttl), TypeError, 'ttlMs')
        }
      })
    })
  }
})

describe('timeoutMs', () => {
  // 0 is a valid timeout (one attempt), and -0 is the same number in JavaScript.
  const rangeBad = RANGE_BAD_MS.filter((v) => v !== 0)
  const calls = {
    waitForLock: (timeout) => lock.waitForLock('input:timeout', timeout),
    'waitForLock with ttlMs': (timeout) => lock.waitForLock('input:timeout', timeout, 1000),
    using: (timeout) => lock.using('input:timeout', () => assert.fail('fn must not run'), { timeoutMs: timeout }),
  }
  for (const [name, call] of Object.entries(calls)) {
    test(`${name}: out-of-range timeoutMs is a RangeError naming timeoutMs`, async () => {
      await quiet(async () => {
        for (const timeout of rangeBad) {
          await expectInvalid(`${name}(timeoutMs ${show(timeout)})`, () => call(timeout), RangeError, 'timeoutMs')
        }
      })
    })
  }

  test('waitForLock: a missing or non-number timeoutMs is a TypeError naming timeoutMs', async () => {
    await quiet(async () => {
      for (const timeout of [undefined, ...TYPE_BAD_MS]) {
        await expectInvalid(
          `waitForLock(timeoutMs ${show(timeout)})`,
          () => lock.waitForLock('input:timeout', timeout),
          TypeError,
          'timeoutMs',
        )
      }
    })
  })

  test('using: a non-number timeoutMs is a TypeError naming timeoutMs', async () => {
    await quiet(async () => {
      for (const timeout of TYPE_BAD_MS) {
        await expectInvalid(
          `using(timeoutMs ${show(timeout)})`,
          () => lock.using('input:timeout', () => assert.fail('fn must not run'), { timeoutMs: timeout }),
          TypeError,
          'timeoutMs',
        )
      }
    })
  })

  test('timeoutMs 0 is allowed: it makes one attempt (db 1)', async () => {
    const key = 'input:timeout-zero'
    const handle = await lockDb1.waitForLock(key, 0, 5000)
    try {
      assert.ok(handle instanceof LockHandle)
      const started = performance.now()
      await assert.rejects(lockDb1.waitForLock(key, 0), { code: 'ELOCKED', retriesAttempted: 0 })
      await assert.rejects(lockDb1.waitForLock(key, -0), { code: 'ELOCKED', retriesAttempted: 0 })
      assert.ok(performance.now() - started < 1000)
    } finally {
      await handle.release()
    }
  })
})

describe('additionalMs', () => {
  test('extend rejects bad additionalMs, naming it, and leaves the lock alone', async () => {
    const key = 'input:extend'
    const handle = await lockDb1.acquire(key, 10000)
    const probe = new Redis({ host: '127.0.0.1', port: server.port, db: 1, lazyConnect: true })
    try {
      await probe.connect()
      const pttlBefore = await probe.pttl(`lock:${key}`)
      await quiet(async () => {
        for (const extra of RANGE_BAD_MS) {
          await expectInvalid(`extend(${show(extra)})`, () => handle.extend(extra), RangeError, 'additionalMs')
        }
        for (const extra of [undefined, ...TYPE_BAD_MS]) {
          await expectInvalid(`extend(${show(extra)})`, () => handle.extend(extra), TypeError, 'additionalMs')
        }
      })
      assert.equal(handle.isHeld, true, 'a rejected extend must not drop the handle')
      assert.equal(await probe.get(`lock:${key}`), handle.token)
      const pttlAfter = await probe.pttl(`lock:${key}`)
      assert.ok(pttlAfter <= pttlBefore && pttlAfter > pttlBefore - 2000, `PTTL ${pttlBefore} -> ${pttlAfter}`)
      // The handle still works after the bad calls.
      await handle.extend(1000)
      const extended = await probe.pttl(`lock:${key}`)
      assert.ok(extended > pttlAfter, `PTTL after a good extend: ${extended}`)
    } finally {
      await handle.release()
      probe.disconnect()
    }
  })
})

describe('other arguments', () => {
  test('using: fn must be a function', async () => {
    await quiet(async () => {
      for (const fn of [undefined, null, 'fn', 5, {}]) {
        await expectInvalid(`using(key, ${show(fn)})`, () => lock.using('input:fn', fn), TypeError, 'fn')
      }
    })
  })

  test('options of acquire / waitForLock / using must be objects', async () => {
    await quiet(async () => {
      for (const options of ['x', 5, null, true]) {
        await expectInvalid(`acquire options ${show(options)}`, () => lock.acquire('input:opts', 1000, options), TypeError, 'options')
        await expectInvalid(
          `waitForLock options ${show(options)}`,
          () => lock.waitForLock('input:opts', 1000, 1000, options),
          TypeError,
          'options',
        )
        await expectInvalid(`using options ${show(options)}`, () => lock.using('input:opts', () => {}, options), TypeError, 'options')
      }
    })
  })

  test('options.signal must be an AbortSignal', async () => {
    await quiet(async () => {
      for (const signal of ['x', {}, null, { aborted: true }]) {
        await expectInvalid(`acquire signal ${show(signal)}`, () => lock.acquire('input:signal', 1000, { signal }), TypeError, 'options.signal')
        await expectInvalid(
          `waitForLock signal ${show(signal)}`,
          () => lock.waitForLock('input:signal', 1000, 1000, { signal }),
          TypeError,
          'options.signal',
        )
      }
    })
  })
})

describe('constructor', () => {
  const url = () => server.url

  test('options that are not an object are a TypeError naming options', async () => {
    await quiet(async () => {
      for (const options of ['x', 5, true]) {
        expectThrows(`options ${show(options)}`, () => new DistributedLock(url(), options), TypeError, 'options')
      }
    })
  })

  test('options.keyPrefix must be a string', async () => {
    await quiet(async () => {
      for (const keyPrefix of [5, null, {}, true]) {
        expectThrows(
          `keyPrefix ${show(keyPrefix)}`,
          () => new DistributedLock(url(), { keyPrefix }),
          TypeError,
          'options.keyPrefix',
        )
      }
    })
  })

  test('options.defaultTtlMs out of range is a RangeError naming options.defaultTtlMs', async () => {
    await quiet(async () => {
      for (const defaultTtlMs of [0, NaN, -5, 1.5, Infinity, 2 ** 31]) {
        expectThrows(
          `defaultTtlMs ${show(defaultTtlMs)}`,
          () => new DistributedLock(url(), { defaultTtlMs }),
          RangeError,
          'options.defaultTtlMs',
        )
      }
      expectThrows(
        'defaultTtlMs "100"',
        () => new DistributedLock(url(), { defaultTtlMs: '100' }),
        TypeError,
        'options.defaultTtlMs',
      )
    })
  })

  test('options.maxRetries must be a whole number of 0 or more', async () => {
    await quiet(async () => {
      for (const maxRetries of [-1, 1.5, NaN, Infinity]) {
        expectThrows(
          `maxRetries ${show(maxRetries)}`,
          () => new DistributedLock(url(), { maxRetries }),
          RangeError,
          'options.maxRetries',
        )
      }
      expectThrows('maxRetries "3"', () => new DistributedLock(url(), { maxRetries: '3' }), TypeError, 'options.maxRetries')
    })
  })

  test('options.retryDelayMs must be 0 or more', async () => {
    await quiet(async () => {
      for (const retryDelayMs of [-1, 1.5, NaN]) {
        expectThrows(
          `retryDelayMs ${show(retryDelayMs)}`,
          () => new DistributedLock(url(), { retryDelayMs }),
          RangeError,
          'options.retryDelayMs',
        )
      }
    })
    // 0 is a valid delay.
    assert.ok(new DistributedLock(url(), { retryDelayMs: 0 }) instanceof DistributedLock)
  })

  test('the redis argument must be a client, a URL or an options object', async () => {
    await quiet(async () => {
      for (const redisArg of [undefined, null, 42, '', true, Symbol('r')]) {
        expectThrows(`redis ${show(redisArg)}`, () => new DistributedLock(redisArg), TypeError, 'redis')
      }
    })
  })

  test('anything that names no server is a TypeError naming the argument, on every API: no default server is guessed', async () => {
    const ExclusiveLock = require('../exclusive-lock')
    const DistributedLockService = require('../maestro')
    const nameless = [[], ['redis://127.0.0.1:6999'], {}, { foo: 1 }, { db: 2 }, { password: 'x', username: 'u' }, { tls: true }]
    await quiet(async () => {
      for (const redisArg of nameless) {
        expectThrows(`redis ${show(redisArg)}`, () => new DistributedLock(redisArg), TypeError, 'redis')
        assert.throws(() => new ExclusiveLock({ name: 'n', cache_connection: redisArg }), (err) => {
          assert.equal(err.code, 'EINVAL')
          if (Array.isArray(redisArg)) {
            // An array is a Redlock (__test__/redlock.test.js), of at least 3 servers.
            assert.ok(err instanceof TypeError, String(err))
            assert.equal(err.argument, 'cache_connection')
            assert.match(err.message, /^cache_connection must name at least 3 Redis servers/)
          } else {
            assert.ok(err instanceof TypeError, String(err))
            assert.equal(err.message, 'A valid cache_connection to a cache store is required')
          }
          return true
        })
        assert.throws(() => new DistributedLockService('k', 1000, redisArg), (err) => {
          assert.ok(err instanceof TypeError, String(err))
          assert.equal(err.code, 'EINVAL')
          assert.equal(err.argument, 'cacheInstance')
          return true
        })
      }
    })
  })

  test('options that name an address may carry other client options, which are ignored', async () => {
    const extras = { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false, family: 4, retryStrategy: () => 10 }
    const lenient = new DistributedLock({ ...extras, host: '127.0.0.1', port: server.port, db: 1 })
    const handle = await lenient.acquire('extras:ignored', 5000)
    await handle.release()
  })

  test('an invalid URL is a TypeError that does not reveal the password', async () => {
    await quiet(async () => {
      for (const bad of ['http://user:hunter2@host', 'http://user:hunter2@127.0.0.1:6379/0', 'not a url hunter2']) {
        const err = expectThrows(`redis ${bad}`, () => new DistributedLock(bad), TypeError, 'redis')
        assert.ok(!err.message.includes('hunter2'), `message reveals the password: ${err.message}`)
        assert.ok(!String(err.stack).includes('hunter2'), 'stack reveals the password')
        assert.ok(!JSON.stringify(Object.assign({}, err)).includes('hunter2'), 'a field reveals the password')
      }
    })
  })

  test('a Sentinel URL without its master name is refused as such, revealing no password', async () => {
    // Closed ports: were anything dialled, the test would fail by the monitor's count too.
    const cases = [
      ['redis+sentinel://:hunter2@127.0.0.1:1', /must name its master/],
    ]
    await quiet(async () => {
      for (const [url, message] of cases) {
        const err = expectThrows(`redis ${url}`, () => new DistributedLock(url), TypeError, 'redis')
        assert.equal(err.code, 'EINVAL')
        assert.match(err.message, message)
        assert.ok(!err.message.includes('hunter2'), `message reveals the password: ${err.message}`)
      }
      // A malformed cluster list is named as such, before anything is dialled.
      const err = expectThrows('redis+cluster:// with a node twice', () => new DistributedLock('redis+cluster://a:1,a:1'), TypeError, 'redis')
      assert.match(err.message, /twice/)
    })
  })
})

test('after all the bad calls, nothing was written', async () => {
  assert.equal(await redis.dbsize(), 0)
  // Only the markers came through the monitor from our own clients; no lock command at all.
  const lockCommands = seen.filter((e) => /^(eval|evalsha|set|del|exists|pexpire|incr|script)$/i.test(e.args[0]))
  const outsideDb1 = lockCommands.filter((e) => String(e.database) !== '1')
  assert.deepEqual(
    outsideDb1.map((e) => e.args.map((a) => String(a).slice(0, 60))),
    [],
    'lock commands were sent to db 0',
  )
})
