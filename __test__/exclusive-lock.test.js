'use strict'

// ExclusiveLock (drop-in for @logdna/exclusive-lock 2.x) against a private redis-server:
// options, defaults and validation, methods, properties, events and their order, the Redis
// layout, the native refresh, and every way of losing the lock.
// Runs on a private redis-server, or on the embedded memory:// backend with NRL_BACKEND=memory
// (`npm test` runs both; see helpers/backend.js).
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const EventEmitter = require('node:events')
const path = require('node:path')
const util = require('node:util')
const { spawn } = require('node:child_process')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { startBackend, redisOnly } = require('./helpers/backend')
const ExclusiveLock = require('../exclusive-lock')
const lib = require('..')
const { siblingKey } = require('./helpers/keys')

const { LockError, LockLostError } = lib

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const FENCE = /^\d{15}$/
// Slack for timing bounds on a loaded 2-core VM.
const MARGIN = 400
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let backend
let raw // our own ioredis client, to look at (and tamper with) what landed in Redis
const locks = new Set() // every ExclusiveLock made here, released in after()
const clients = new Set() // every extra client made here, closed in after()
const children = new Set()

/** A new ExclusiveLock (URL connection unless given), remembered for cleanup. */
function make(opts) {
  const lock = new ExclusiveLock({ cache_connection: backend.url, ...opts })
  locks.add(lock)
  return lock
}

/** A logger recording every call as [level, ...args]. */
function spyLog() {
  const calls = []
  const log = { calls }
  for (const level of ['info', 'warn', 'error', 'debug', 'trace']) {
    log[level] = (...args) => calls.push([level, ...args])
  }
  return log
}

/** Records every event of `lock` as { type, args, at } (performance.now()). */
function record(lock) {
  const events = []
  for (const type of ['acquired', 'refreshed', 'released', 'error']) {
    lock.on(type, (...args) => events.push({ type, args, at: performance.now() }))
  }
  return events
}

const ofType = (events, type) => events.filter((e) => e.type === type)

async function waitFor(predicate, timeoutMs, what) {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(10)
  }
}

/** Resolves once `lock` has emitted `count` events of `type`. */
function waitForEvents(events, type, count, timeoutMs) {
  return waitFor(() => ofType(events, type).length >= count, timeoutMs, `${count} '${type}' event(s)`)
}

/** Keys as bytes (sibling keys are not UTF-8), sorted, for comparing sets of keys. */
const binary = (keys) => keys.map((k) => Buffer.from(k).toString('latin1')).sort()
const keysLike = async (pattern) => binary(await raw.keysBuffer(pattern))

function ownerKey(key) {
  return siblingKey(key, 'owner')
}

function fenceKey(key) {
  return siblingKey(key, 'fence')
}

/** PTTL and PEXPIRETIME of the lock key and of its owner key, read atomically. */
async function pttls(key) {
  const replies = await raw
    .multi()
    .pttl(key)
    .pttl(ownerKey(key))
    .call('PEXPIRETIME', key)
    .call('PEXPIRETIME', ownerKey(key))
    .exec()
  const [lockTtl, ownerTtl, lockAt, ownerAt] = replies.map(([err, value]) => {
    if (err) throw err
    return value
  })
  return { lockTtl, ownerTtl, lockAt, ownerAt }
}

function assertValidation(fn, instancePath, message) {
  const log = spyLog()
  let thrown
  assert.throws(
    () => fn(log),
    (err) => {
      thrown = err
      assert.equal(err.constructor, Error, `expected a plain Error, got ${err.name}`)
      assert.equal(err.message, 'Input validation failed')
      assert.equal(err.code, 'EINVAL')
      assert.deepEqual(err.errors, [{ instancePath, message }])
      return true
    },
  )
  return { log, thrown }
}

function assertConnectionError(cache_connection) {
  assert.throws(
    () => new ExclusiveLock({ name: 'bad-connection', cache_connection }),
    (err) => {
      assert.ok(err instanceof TypeError, `expected TypeError, got ${err.name}: ${err.message}`)
      assert.equal(err.message, 'A valid cache_connection to a cache store is required')
      assert.equal(err.code, 'EINVAL')
      return true
    },
    `cache_connection ${util.inspect(cache_connection)} must be refused`,
  )
}

function assertRangeMeta(opts, meta) {
  assert.throws(
    () => new ExclusiveLock({ name: 'range', cache_connection: backend.url, ...opts }),
    (err) => {
      assert.ok(err instanceof RangeError, `expected RangeError, got ${err.name}`)
      assert.equal(err.message, 'lock_refresh_ms must be at least 500ms less than lock_ttl_ms')
      assert.equal(err.code, 'EINVAL')
      assert.deepEqual(err.meta, meta)
      return true
    },
  )
}

function assertLost(err, lock) {
  assert.ok(err instanceof LockLostError, `expected LockLostError, got ${err?.name}: ${err?.message}`)
  assert.ok(err instanceof LockError)
  assert.ok(err instanceof Error)
  assert.equal(err.name, 'LockLostError')
  assert.equal(err.code, 'ELOST')
  assert.equal(err.key, lock.key)
  assert.ok(err.message.includes(lock.key), `message ${JSON.stringify(err.message)} names the key`)
}

before(async () => {
  backend = await startBackend()
  raw = backend.client()
  raw.on('error', () => {}) // reconnect noise while the server is stopped on purpose
  await raw.connect()
})

after(async () => {
  for (const lock of locks) {
    lock.removeAllListeners('error')
    lock.on('error', () => {})
    await lock.release().catch(() => {})
  }
  for (const child of children) {
    try {
      process.kill(child.pid, 'SIGKILL')
    } catch {}
  }
  for (const client of clients) client.disconnect()
  if (raw) raw.disconnect()
  if (backend) await backend.close()
})

describe('module shape', () => {
  test('the subpath module is the class itself, the same class as the root export', async () => {
    assert.equal(typeof ExclusiveLock, 'function')
    assert.equal(lib.ExclusiveLock, ExclusiveLock)
    assert.equal(require('native-redis-lock/exclusive-lock'), ExclusiveLock)
    assert.equal(require('native-redis-lock').ExclusiveLock, ExclusiveLock)
    const esm = await import('native-redis-lock/exclusive-lock')
    assert.equal(esm.default, ExclusiveLock)
    assert.equal(esm.ExclusiveLock, ExclusiveLock)
  })

  test('an instance is a real EventEmitter tagged ExclusiveLock', () => {
    const lock = make({ name: 'shape' })
    assert.ok(lock instanceof ExclusiveLock)
    assert.ok(lock instanceof EventEmitter)
    assert.equal(Object.getPrototypeOf(ExclusiveLock.prototype), EventEmitter.prototype)
    assert.equal(Object.prototype.toString.call(lock), '[object ExclusiveLock]')
    assert.equal(typeof lock.on, 'function')
    assert.equal(lock.listenerCount('error'), 0, 'no default error listener, as the original')
  })

  test('LockLostError is exported, a LockError with code ELOST', () => {
    assert.equal(typeof LockLostError, 'function')
    const err = new LockLostError('k')
    assert.ok(err instanceof LockError)
    assert.equal(err.code, 'ELOST')
    assert.equal(err.key, 'k')
  })
})

describe('options and defaults', () => {
  test('defaults: ttl 3000, refresh 1000, contents "1", prefix exclusive-lock, stall 3 x ttl, silent log', () => {
    const lock = new ExclusiveLock({ name: 'defaults', cache_connection: backend.url })
    assert.equal(lock.key, 'exclusive-lock:defaults')
    assert.equal(lock.name, 'defaults')
    assert.equal(lock.lock_ttl_ms, 3000)
    assert.equal(lock.lock_refresh_ms, 1000)
    assert.equal(lock.lock_contents, '1')
    assert.equal(lock.max_stall_ms, 9000)
    assert.equal(lock.max_hold_ms, undefined)
    assert.equal(lock.cache_connection, backend.url)
    assert.equal(lock.acquired, false)
    assert.equal(lock.fence, null)
    for (const level of ['info', 'warn', 'error', 'debug']) {
      assert.equal(typeof lock.log[level], 'function', `default log.${level}`)
      assert.equal(lock.log[level]({ any: 'thing' }, 'message'), undefined)
    }
  })

  redisOnly('every option is honoured and exposed', () => {
    const log = spyLog()
    const connection = { host: '127.0.0.1', port: backend.server.port }
    const lock = new ExclusiveLock({
      name: 'custom name',
      cache_connection: connection,
      log,
      lock_ttl_ms: 5000,
      lock_refresh_ms: 1500,
      lock_contents: 'pod-7',
      key_prefix: 'my prefix',
      max_stall_ms: 0,
      max_hold_ms: 60000,
      something_else: true, // extra keys are allowed, as the original's schema allows them
    })
    assert.equal(lock.key, 'my-prefix:custom-name')
    assert.equal(lock.name, 'custom-name')
    assert.equal(lock.log, log)
    assert.equal(lock.cache_connection, connection)
    assert.equal(lock.lock_ttl_ms, 5000)
    assert.equal(lock.lock_refresh_ms, 1500)
    assert.equal(lock.lock_contents, 'pod-7')
    assert.equal(lock.max_stall_ms, 0)
    assert.equal(lock.max_hold_ms, 60000)
    assert.deepEqual(log.calls, [], 'constructing logs nothing')
  })

  test('max_stall_ms defaults to 3 x lock_ttl_ms', () => {
    const lock = make({ name: 'stall-default', lock_ttl_ms: 600, lock_refresh_ms: 100 })
    assert.equal(lock.max_stall_ms, 1800)
  })

  test('name and key_prefix are slugged: every run of [\\s\\W] becomes one "-"', () => {
    const cases = [
      ['my distributed app', 'my-distributed-app'],
      ['a  b!!c', 'a-b-c'],
      ['  lead and trail  ', '-lead-and-trail-'],
      ['under_score-dash.dot', 'under_score-dash-dot'],
      ['café ünï', 'caf-n-'],
      ['{tag}', '-tag-'],
      ['x', 'x'],
    ]
    for (const [name, slug] of cases) {
      const lock = new ExclusiveLock({ name, cache_connection: backend.url })
      assert.equal(lock.name, slug, `name ${JSON.stringify(name)}`)
      assert.equal(lock.key, `exclusive-lock:${slug}`, `key of ${JSON.stringify(name)}`)
    }
    const prefixed = new ExclusiveLock({ name: 'n', key_prefix: 'a:b c', cache_connection: backend.url })
    assert.equal(prefixed.key, 'a-b-c:n')
  })

  test('unref() and ref() return the instance', () => {
    const lock = make({ name: 'ref-unref' })
    assert.equal(lock.unref(), lock)
    assert.equal(lock.ref(), lock)
  })
})

describe('validation', () => {
  test('schema failures: Error("Input validation failed"), code EINVAL, errors [{instancePath, message}], logged first', () => {
    const url = backend.url
    const cases = [
      [{}, '', "must have required property 'name'"],
      [{ name: 'x' }, '', "must have required property 'cache_connection'"],
      [{ cache_connection: url }, '', "must have required property 'name'"],
      [{ name: 5, cache_connection: url }, '/name', 'must be string'],
      [{ name: '', cache_connection: url }, '/name', 'must NOT have fewer than 1 characters'],
      [{ name: 'x', cache_connection: url, lock_ttl_ms: 5000 }, '', 'must have property lock_refresh_ms when property lock_ttl_ms is present'],
      [{ name: 'x', cache_connection: url, lock_refresh_ms: 500 }, '', 'must have property lock_ttl_ms when property lock_refresh_ms is present'],
      [{ name: 'x', cache_connection: url, lock_contents: null }, '/lock_contents', 'must be string'],
      [{ name: 'x', cache_connection: url, lock_contents: 7 }, '/lock_contents', 'must be string'],
      [{ name: 'x', cache_connection: url, lock_ttl_ms: '5000', lock_refresh_ms: 1000 }, '/lock_ttl_ms', 'must be number'],
      [{ name: 'x', cache_connection: url, lock_ttl_ms: 5000, lock_refresh_ms: '1000' }, '/lock_refresh_ms', 'must be number'],
      [{ name: 'x', cache_connection: url, key_prefix: 7 }, '/key_prefix', 'must be string'],
      [{ name: 'x', cache_connection: url, max_stall_ms: '1000' }, '/max_stall_ms', 'must be number'],
      [{ name: 'x', cache_connection: url, max_hold_ms: '1000' }, '/max_hold_ms', 'must be number'],
    ]
    for (const [opts, instancePath, message] of cases) {
      const { log, thrown } = assertValidation((log) => new ExclusiveLock({ ...opts, log }), instancePath, message)
      const errors = log.calls.filter(([level]) => level === 'error')
      assert.equal(errors.length, 1, `log.error called once for ${JSON.stringify(opts)}`)
      assert.deepEqual(errors[0].slice(1), [thrown], 'the thrown error is logged, as log.error(err)')
    }
  })

  test('a log that is not an object is itself a validation failure', () => {
    assertValidation(() => new ExclusiveLock({ name: 'x', cache_connection: backend.url, log: 'pino' }), '/log', 'must be object')
  })

  test('no options are an empty object, which lacks its name; options that are not an object are refused', () => {
    for (const opts of [undefined, null]) {
      assertValidation(() => new ExclusiveLock(opts), '', "must have required property 'name'")
    }
    for (const opts of ['x', 7, true]) {
      assertValidation(() => new ExclusiveLock(opts), '', 'must be object')
    }
  })

  test('an unusable cache_connection: TypeError("A valid cache_connection to a cache store is required"), EINVAL', () => {
    for (const bad of ['', { set() {} }, { sendCommand() {} }, { port: 'x' }, { host: 7 }, {}, { foo: 1 }]) {
      assertConnectionError(bad)
    }
    // What the original's schema refuses before it looks for `.set()`.
    for (const bad of [42, () => {}, true, null]) {
      assertValidation(() => new ExclusiveLock({ name: 'x', cache_connection: bad }), '/cache_connection', 'must be object')
    }
    // An array is a Redlock (__test__/redlock.test.js): an empty one names too few servers.
    assert.throws(() => new ExclusiveLock({ name: 'x', cache_connection: [] }), (err) => err.code === 'EINVAL' && err.argument === 'cache_connection' && /at least 3/.test(err.message))
    for (const bad of [NaN, Infinity]) {
      assertValidation(() => new ExclusiveLock({ name: 'x', cache_connection: backend.url, lock_ttl_ms: bad, lock_refresh_ms: 100 }), '/lock_ttl_ms', 'must be number')
    }
  })

  test('lock_refresh_ms must be at least 500 ms below lock_ttl_ms: RangeError with meta {ttl, refresh, diff}', () => {
    assertRangeMeta({ lock_ttl_ms: 1000, lock_refresh_ms: 600 }, { lock_ttl_ms: 1000, lock_refresh_ms: 600, diff: 400 })
    assertRangeMeta({ lock_ttl_ms: 1000, lock_refresh_ms: 501 }, { lock_ttl_ms: 1000, lock_refresh_ms: 501, diff: 499 })
    assertRangeMeta({ lock_ttl_ms: 1000, lock_refresh_ms: 2000 }, { lock_ttl_ms: 1000, lock_refresh_ms: 2000, diff: -1000 })
    // exactly 500 below is fine
    const ok = new ExclusiveLock({ name: 'range-ok', cache_connection: backend.url, lock_ttl_ms: 1000, lock_refresh_ms: 500 })
    assert.equal(ok.lock_refresh_ms, 500)
  })

  test('max_stall_ms must be 0 or at least 250; max_hold_ms and the TTLs must be positive (RangeError, EINVAL)', () => {
    const bad = [
      [{ max_stall_ms: 100 }, /max_stall_ms/],
      [{ max_stall_ms: -1 }, /max_stall_ms/],
      [{ max_hold_ms: 0 }, /max_hold_ms/],
      [{ max_hold_ms: -5 }, /max_hold_ms/],
      [{ lock_ttl_ms: -1000, lock_refresh_ms: -2000 }, /lock_ttl_ms/],
    ]
    for (const [opts, pattern] of bad) {
      assert.throws(
        () => new ExclusiveLock({ name: 'x', cache_connection: backend.url, ...opts }),
        (err) => {
          assert.ok(err instanceof RangeError, `${JSON.stringify(opts)}: got ${err.name}: ${err.message}`)
          assert.equal(err.code, 'EINVAL')
          assert.match(err.message, pattern)
          return true
        },
      )
    }
    assert.equal(make({ name: 'x', max_stall_ms: 0 }).max_stall_ms, 0)
    assert.equal(make({ name: 'x', max_stall_ms: 250 }).max_stall_ms, 250)
  })
})

describe('acquire, inspect, release and the Redis layout', () => {
  test('an acquire whose fence cannot be drawn rejects and leaves the keys as they were', async () => {
    for (const [name, counter] of [['garbage', 'oops'], ['exhausted', '999999999999998']]) {
      const lock = make({ name: `broken fence ${name}` })
      const key = `exclusive-lock:broken-fence-${name}`
      await raw.set(fenceKey(key), counter)
      // Twice: the first attempt may go through the runtime, the next through the JS thread.
      for (let i = 0; i < 2; i++) {
        await assert.rejects(lock.acquire(), /no fencing token can be drawn/)
        assert.equal(lock.acquired, false)
        assert.equal(await raw.exists(key), 0, 'the failed acquire left the lock key')
        assert.equal(await raw.exists(ownerKey(key)), 0, 'the failed acquire left the owner key')
        // The transaction's INCRBY runs whatever the counter holds; it stays unusable.
        const after = await raw.get(fenceKey(key))
        assert.ok(after === counter || BigInt(after) > 999999999999997n, `counter ${after}`)
      }
    }
  })

  redisOnly('with defaults: events, properties and the keys in Redis, byte for byte', async () => {
    const log = spyLog()
    const lock = make({ name: 'layout defaults', log })
    const events = record(lock)
    assert.equal(await lock.acquire(), true)
    assert.equal(lock.acquired, true)
    assert.deepEqual(events.map((e) => [e.type, e.args]), [['acquired', ['exclusive-lock:layout-defaults']]])
    assert.deepEqual(
      log.calls.filter(([level]) => level === 'info'),
      [['info', { lock_contents: '1', lock_refresh_ms: 1000, lock_ttl_ms: 3000 }, '%s lock acquired', lock.name]],
    )

    const key = 'exclusive-lock:layout-defaults'
    // The owner key is the acquire script's, or (a transaction took the lock) the first
    // refresh's: until then the lock key's own expiry proves the lock ours.
    const layout = await keysLike('*layout-defaults*')
    assert.ok(
      [binary([key, fenceKey(key)]), binary([key, fenceKey(key), ownerKey(key)])].some((keys) => util.isDeepStrictEqual(layout, keys)),
      util.inspect(layout),
    )
    assert.equal(await raw.type(key), 'string')
    assert.deepEqual(await raw.getBuffer(key), Buffer.from('1'))
    const { lockTtl, lockAt } = await pttls(key)
    assert.ok(lockTtl > 2500 && lockTtl <= 3000, `PTTL ${lockTtl} not in (2500, 3000]`)
    assert.ok(lockAt > 0)
    assert.match(lock.fence, FENCE)
    // The counter keeps the next fence, for a handover.
    assert.equal(lock.fence, String((await raw.get(fenceKey(key))) - 1).padStart(15, '0'))
    // It outlives the hold by fence_retention_ms (7 days by default; README, "Fencing tokens"),
    // and by a quarter of that more when a transaction pushed it.
    const counterTtl = await raw.pttl(fenceKey(key))
    const week = 7 * 24 * 60 * 60 * 1000
    assert.ok(counterTtl > week && counterTtl <= week * 1.25 + 3000, `the fence counter outlives holds by a week: PTTL ${counterTtl}`)

    // The default refresh (every 1000 ms) pushes the TTL back to 3000, and both keys share
    // one absolute expiry from then on.
    await waitForEvents(events, 'refreshed', 1, 1000 + MARGIN + 500)
    assert.deepEqual(ofType(events, 'refreshed')[0].args, [{ key, lock_ttl_ms: 3000 }])
    assert.deepEqual(await keysLike('*layout-defaults*'), binary([key, fenceKey(key), ownerKey(key)]))
    const token = await raw.get(ownerKey(key))
    assert.match(token, UUID_V4)
    const after1 = await pttls(key)
    assert.ok(after1.lockTtl > 2500, `PTTL ${after1.lockTtl} after a refresh`)
    assert.ok(Math.abs(after1.lockTtl - after1.ownerTtl) <= 1, `owner key expires with the lock key (${after1.lockTtl} vs ${after1.ownerTtl})`)
    assert.equal(after1.ownerAt, after1.lockAt, 'one absolute expiry for both keys')
    assert.ok(after1.lockAt > lockAt, 'the refresh moved the expiry')
    await waitForEvents(events, 'refreshed', 2, 1000 + MARGIN + 500)
    assert.equal(await raw.get(ownerKey(key)), token, 'the token stays for the whole hold')

    assert.equal(await lock.release(), undefined)
    assert.equal(lock.acquired, false)
    assert.equal(lock.fence, null)
    assert.deepEqual(events.at(-1).args, [key])
    assert.equal(events.at(-1).type, 'released')
    assert.equal(await raw.exists(key, ownerKey(key)), 0, 'lock and owner keys are gone')
    assert.deepEqual(await keysLike('*layout-defaults*'), binary([fenceKey(key)]))
    assert.deepEqual(log.calls.filter(([level]) => level === 'info').at(-1), ['info', '%s lock removed', key])

    // The token never shows: not in events, log calls, inspect() or the instance itself.
    assert.ok(!JSON.stringify(events.map((e) => e.args)).includes(token))
    assert.ok(!util.inspect(log.calls, { depth: 5 }).includes(token))
    assert.ok(!util.inspect(lock, { depth: 5, showHidden: true }).includes(token))
  })

  test('custom contents and prefix land in Redis as given; the owner token changes per hold', async () => {
    const lock = make({ name: 'layout custom', key_prefix: 'jobs', lock_contents: 'pod-7 é ✓', lock_ttl_ms: 8000, lock_refresh_ms: 200 })
    // The owner key, once a refresh has written it (a transaction's hold has none before).
    const ownerToken = async () => {
      await new Promise((resolve) => lock.once('refreshed', resolve))
      return raw.get(ownerKey(key))
    }
    const key = 'jobs:layout-custom'
    assert.equal(lock.key, key)
    assert.equal(await lock.acquire(), true)
    assert.deepEqual(await raw.getBuffer(key), Buffer.from('pod-7 é ✓', 'utf8'))
    const ttl = await raw.pttl(key)
    assert.ok(ttl > 7500 && ttl <= 8000, `PTTL ${ttl}`)
    const first = await ownerToken()
    const inspected = await lock.inspect()
    assert.deepEqual(Object.keys(inspected).sort(), ['lock_contents', 'lock_ttl_ms'])
    assert.equal(inspected.lock_contents, 'pod-7 é ✓')
    assert.ok(inspected.lock_ttl_ms > 7000 && inspected.lock_ttl_ms <= 8000)
    assert.ok(!JSON.stringify(inspected).includes(first))
    await lock.release()
    assert.equal(await lock.acquire(), true)
    const second = await ownerToken()
    assert.match(first, UUID_V4)
    assert.match(second, UUID_V4)
    assert.notEqual(first, second)
    await lock.release()
    assert.equal(await raw.exists(key, ownerKey(key)), 0)
  })

  redisOnly('acquire() while holding: true again, a warn, no event and no Redis call (works with Redis paused)', async () => {
    const log = spyLog()
    const lock = make({ name: 'double acquire', log })
    const events = record(lock)
    assert.equal(await lock.acquire(), true)
    const fence = lock.fence
    backend.server.pause()
    let again
    const started = performance.now()
    try {
      again = await Promise.race([lock.acquire(), sleep(1000).then(() => 'timed out')])
    } finally {
      backend.server.resume()
    }
    assert.equal(again, true, 'resolved without talking to the (paused) server')
    assert.ok(performance.now() - started < 1000)
    assert.deepEqual(log.calls.filter(([level]) => level === 'warn'), [['warn', '%s lock is already acquired. Must call release() first.', lock.key]])
    assert.equal(ofType(events, 'acquired').length, 1)
    assert.equal(lock.fence, fence)
    assert.equal(lock.acquired, true)
    await lock.release()
  })

  test('inspect(): {lock_ttl_ms, lock_contents} for any instance, raw PTTL (-1 without TTL), null when free', async () => {
    const holder = make({ name: 'inspect me', lock_contents: 'holder-a' })
    const other = make({ name: 'inspect me' })
    assert.equal(await holder.inspect(), null)
    assert.equal(await other.inspect(), null)
    await holder.acquire()
    const seen = await other.inspect()
    assert.equal(seen.lock_contents, 'holder-a')
    assert.ok(Number.isInteger(seen.lock_ttl_ms) && seen.lock_ttl_ms > 2000 && seen.lock_ttl_ms <= 3000, `ttl ${seen.lock_ttl_ms}`)
    assert.equal(other.acquired, false, 'inspecting does not acquire')
    await holder.release()
    assert.equal(await other.inspect(), null)

    // A key written by someone else entirely, without a TTL: raw PTTL -1 and the raw string.
    await raw.set(other.key, '{"json":true}')
    assert.deepEqual(await other.inspect(), { lock_ttl_ms: -1, lock_contents: '{"json":true}' })
    await raw.del(other.key)
  })

  test('inspect() rejects and logs on a Redis error (wrong key type)', async () => {
    const log = spyLog()
    const lock = make({ name: 'inspect wrongtype', log })
    await raw.hset(lock.key, 'f', 'v')
    try {
      await assert.rejects(lock.inspect(), (err) => err instanceof Error && /WRONGTYPE/i.test(err.message))
      assert.equal(log.calls.filter(([level]) => level === 'error').length, 1)
    } finally {
      await raw.del(lock.key)
    }
  })

  test('release(): resolves undefined, idempotent, a no-op for non-holders (never deletes their lock)', async () => {
    const a = make({ name: 'release rules' })
    const b = make({ name: 'release rules' })
    const aEvents = record(a)
    const bEvents = record(b)
    assert.equal(await b.release(), undefined, 'never acquired: no-op')
    assert.equal(await a.acquire(), true)
    assert.equal(await b.acquire(), false)
    assert.equal(await b.release(), undefined, 'lost the race: no-op')
    assert.equal(await raw.get(a.key), '1', "b's release left a's lock")
    assert.deepEqual(bEvents, [], 'b never emits')
    await a.release()
    assert.equal(await a.release(), undefined)
    assert.equal(await a.release(), undefined)
    assert.deepEqual(aEvents.map((e) => e.type), ['acquired', 'released'], 'released emitted once')
    assert.equal(await raw.exists(a.key), 0)
  })

  test('release() while acquire() is in flight wins: the acquisition ends released, nothing is left held or refreshed', async () => {
    for (let round = 0; round < 20; round++) {
      const lock = make({ name: 'release wins', lock_ttl_ms: 1000, lock_refresh_ms: 300 })
      const events = record(lock)
      const acquiring = lock.acquire()
      // Released after a varying share of the attempt's round trip.
      for (let i = 0; i < round % 4; i++) await null
      const releasing = lock.release()
      assert.equal(await acquiring, false, `round ${round}: the acquisition won over the release`)
      assert.equal(await releasing, undefined)
      assert.equal(lock.acquired, false)
      assert.equal(lock.refresh_timer, null)
      assert.equal(await raw.exists(lock.key), 0, `round ${round}: the lock Redis granted is still there`)
      assert.deepEqual(events, [], 'nothing was acquired, so nothing was released either')
      // It can be acquired afresh, and released as usual.
      assert.equal(await lock.acquire(), true)
      await lock.release()
    }
  })

  redisOnly("the original's fields: acquired, is_refreshing (a refresh in flight), refresh_timer (while held, else null)", async () => {
    const lock = make({ name: 'fields', lock_ttl_ms: 2000, lock_refresh_ms: 200 })
    assert.equal(lock.acquired, false)
    assert.equal(lock.is_refreshing, false)
    assert.equal(lock.refresh_timer, null)
    assert.equal(await lock.acquire(), true)
    assert.equal(lock.acquired, true)
    assert.ok(lock.refresh_timer, 'refresh_timer is truthy while held')
    assert.equal(lock.refresh_timer.hasRef(), true)
    // Redis stalls every client for 600 ms: the next refresh is caught in flight.
    await raw.client('PAUSE', 600, 'ALL')
    await waitFor(() => lock.is_refreshing === true, 1000, 'a refresh in flight')
    await waitFor(() => lock.is_refreshing === false, 2000, 'the refresh answered')
    assert.equal(lock.acquired, true)
    assert.equal(lock.refresh_timer.unref(), lock.refresh_timer)
    assert.equal(lock.refresh_timer.hasRef(), false)
    lock.refresh_timer.ref()
    await lock.release()
    assert.equal(lock.acquired, false)
    assert.equal(lock.is_refreshing, false)
    assert.equal(lock.refresh_timer, null)
  })

  test("lock_contents and lock_ttl_ms changed between holds are the next hold's, as the original reads them at acquire", async () => {
    const lock = make({ name: 'terms', lock_ttl_ms: 3000, lock_refresh_ms: 1000 })
    assert.equal(await lock.acquire(), true)
    await lock.release()
    lock.lock_contents = 'changed'
    lock.lock_ttl_ms = 9000
    const events = record(lock)
    assert.equal(await lock.acquire(), true)
    assert.equal(await raw.get(lock.key), 'changed')
    const pttl = await raw.pttl(lock.key)
    assert.ok(pttl > 8500 && pttl <= 9000, `PTTL ${pttl}`)
    await waitForEvents(events, 'refreshed', 1, 2000)
    assert.deepEqual(ofType(events, 'refreshed')[0].args, [{ key: lock.key, lock_ttl_ms: 9000 }])
    lock.acquired = false // assignable, as the original's field; the hold is native
    assert.equal(lock.acquired, true)
    let seen
    lock.once('released', () => (seen = { acquired: lock.acquired, timer: lock.refresh_timer }))
    await lock.release()
    assert.deepEqual(seen, { acquired: true, timer: null }, "as the original's: acquired still true, refresh_timer already null")
    assert.equal(await raw.exists(lock.key), 0)
  })

  test('a second instance cannot acquire while the first holds; after release it can; fences increase', async () => {
    const a = make({ name: 'contend' })
    const b = make({ name: 'contend', cache_connection: backend.alias })
    // b's connection has run attempts before, as a long-lived process's has: its first
    // attempt at 'contend' then goes as the transaction (proto/acquire.rs `AttemptForm`; on
    // Redis, once the JS thread's socket has run one), which draws two fences even when it
    // finds the lock held. As the script (a socket's first attempt, the runtime's, memory://)
    // it draws none: either way the fences drawn in vain are counted.
    const warm = make({ name: 'contend-warm', cache_connection: backend.alias })
    for (let i = 0; i < 2; i++) {
      assert.equal(await warm.acquire(), true)
      await warm.release()
    }
    const bEvents = record(b)
    assert.equal(await a.acquire(), true)
    const fenceA = a.fence
    const missed = async () => BigInt((await raw.get(siblingKey(a.key, 'missed'))) ?? 0)
    const missedBefore = await missed()
    for (let i = 0; i < 3; i++) assert.equal(await b.acquire(), false)
    assert.equal(b.acquired, false)
    assert.equal(b.fence, null)
    assert.deepEqual(bEvents, [])
    await a.release()
    assert.equal(await b.acquire(), true)
    assert.equal(b.acquired, true)
    assert.match(b.fence, FENCE)
    // Each acquisition draws two (the second kept for a handover); whatever failed attempts
    // drew is counted as drawn in vain, so `watch` reads two per acquisition.
    const inVain = (await missed()) - missedBefore
    assert.ok(BigInt(b.fence) > BigInt(fenceA), 'fences increase')
    assert.equal(BigInt(b.fence), BigInt(fenceA) + 2n + inVain, `every fence b's failed attempts drew is counted (${inVain} counted)`)
    // The first failed attempt only may be the transaction: after it found the lock held, the
    // next go as the script for a while (ops/kept_fences.rs), drawing none.
    assert.ok(inVain === 0n || inVain === 2n, `${inVain} drawn in vain by 3 failed attempts`)
    assert.equal(await a.acquire(), false)
    await b.release()
  })

  redisOnly('an ioredis client with keyPrefix: the keys carry it, lock.key does not; the client is not touched', async () => {
    const client = new Redis({ host: '127.0.0.1', port: backend.server.port, keyPrefix: 'app:', lazyConnect: true })
    clients.add(client)
    const lock = make({ name: 'prefixed', cache_connection: client })
    assert.equal(lock.key, 'exclusive-lock:prefixed')
    assert.equal(lock.cache_connection, client)
    assert.equal(await lock.acquire(), true)
    const key = 'app:exclusive-lock:prefixed'
    // The owner key is there unless a transaction took the lock (see 'with defaults').
    const layout = await keysLike('*prefixed*')
    assert.ok(
      [binary([key, fenceKey(key)]), binary([key, fenceKey(key), ownerKey(key)])].some((keys) => util.isDeepStrictEqual(layout, keys)),
      util.inspect(layout),
    )
    assert.equal(await raw.get(key), '1')
    assert.equal((await lock.inspect()).lock_contents, '1')
    const unprefixed = make({ name: 'prefixed' })
    assert.equal(await unprefixed.inspect(), null, 'the unprefixed key is another lock')
    await lock.release()
    assert.equal(await raw.exists(key, ownerKey(key)), 0)
    assert.equal(client.status, 'wait', 'our lock never connected the user client')
  })

  redisOnly('a node-redis client (by socket or url) works, and is not opened', async () => {
    const bySocket = createClient({ socket: { host: '127.0.0.1', port: backend.server.port } })
    const byUrl = createClient({ url: backend.url })
    for (const [label, client] of [['socket', bySocket], ['url', byUrl]]) {
      const lock = make({ name: `node redis ${label}`, cache_connection: client, lock_contents: label })
      assert.equal(await lock.acquire(), true, label)
      assert.equal(await raw.get(`exclusive-lock:node-redis-${label}`), label)
      assert.equal((await lock.inspect()).lock_contents, label)
      await lock.release()
      assert.equal(await raw.exists(`exclusive-lock:node-redis-${label}`), 0)
      assert.equal(client.isOpen, false, `${label}: the user's client stays closed`)
    }
  })

  redisOnly('URL string and {host, port} object connections', async () => {
    for (const [label, connection] of [
      ['url', backend.url],
      ['object', { host: '127.0.0.1', port: backend.server.port }],
    ]) {
      const lock = make({ name: `by ${label}`, cache_connection: connection })
      assert.equal(await lock.acquire(), true, label)
      assert.equal(await raw.get(`exclusive-lock:by-${label}`), '1')
      await lock.release()
    }
  })
})

describe('events', () => {
  test('order acquired -> refreshed+ -> released with exact payloads; nothing after release', async () => {
    const lock = make({ name: 'event order', lock_ttl_ms: 800, lock_refresh_ms: 100 })
    const events = record(lock)
    const key = 'exclusive-lock:event-order'
    await lock.acquire()
    await waitForEvents(events, 'refreshed', 3, 2000)
    await lock.release()
    const count = events.length
    await sleep(400)
    assert.equal(events.length, count, 'no event after release')
    const types = events.map((e) => e.type)
    assert.match(types.join(','), /^acquired(,refreshed){3,},released$/)
    for (const e of events) {
      if (e.type === 'refreshed') assert.deepEqual(e.args, [{ key, lock_ttl_ms: 800 }])
      else assert.deepEqual(e.args, [key], e.type)
    }
  })

  test("'refreshed' crosses into JS only while a listener exists", async () => {
    const log = spyLog()
    const lock = make({ name: 'refreshed listener', log, lock_ttl_ms: 600, lock_refresh_ms: 100 })
    const traces = () => log.calls.filter(([level]) => level === 'trace').length
    await lock.acquire()
    await sleep(500)
    assert.equal(traces(), 0, 'no refresh reached JS without a listener')
    const seen = []
    const listener = (payload) => seen.push(payload)
    lock.on('refreshed', listener)
    await waitFor(() => seen.length >= 2, 1500, "two 'refreshed' events")
    assert.ok(traces() >= 2, 'each delivered refresh is traced')
    lock.off('refreshed', listener)
    await sleep(200) // one in flight may still land
    const settled = traces()
    await sleep(500)
    assert.equal(traces(), settled, 'no more after the listener left')
    assert.ok((await raw.pttl(lock.key)) > 300, 'the refreshes themselves went on')
    await lock.release()
  })
})

describe('the native refresh', () => {
  test('keeps a lock (ttl 600, refresh 100) alive for 10 x ttl, each tick resetting PTTL to ~ttl', async () => {
    const TTL = 600
    const REFRESH = 100
    const HOLD = 10 * TTL
    const lock = make({ name: 'refresh ten ttl', lock_ttl_ms: TTL, lock_refresh_ms: REFRESH })
    const key = lock.key
    const afterRefresh = []
    const refreshTimes = []
    lock.on('refreshed', () => {
      refreshTimes.push(performance.now())
      raw.pttl(key).then((ttl) => afterRefresh.push(ttl))
    })
    assert.equal(await lock.acquire(), true)
    const started = performance.now()
    const samples = []
    while (performance.now() - started < HOLD) {
      samples.push(await pttls(key))
      await sleep(25)
    }
    assert.equal(lock.acquired, true)
    const count = refreshTimes.length
    await lock.release()

    const lockTtls = samples.map((s) => s.lockTtl)
    assert.ok(samples.length > 50, `${samples.length} samples`)
    assert.ok(Math.min(...lockTtls) > 150, `PTTL fell to ${Math.min(...lockTtls)} (never missing, never near expiry)`)
    assert.ok(Math.max(...lockTtls) <= TTL)
    // The owner key exists from the first refresh at the latest, on the lock key's expiry.
    const withOwner = samples.filter((s) => s.ownerAt !== -2)
    assert.ok(withOwner.length >= samples.length - 8, `${withOwner.length} of ${samples.length} samples had the owner key`)
    for (const s of withOwner) {
      assert.equal(s.ownerAt, s.lockAt, `owner key expires with the lock key: ${JSON.stringify(s)}`)
    }
    const sortedTtls = [...lockTtls].sort((x, y) => x - y)
    assert.ok(sortedTtls[Math.floor(sortedTtls.length / 2)] > TTL - 2 * REFRESH, 'median PTTL stays near the ttl')

    // About one refresh per lock_refresh_ms (never sooner: see the next test).
    assert.ok(count >= HOLD / REFRESH / 2 && count <= (HOLD / REFRESH) * 2 + 5, `${count} refreshes in ${HOLD} ms`)
    const gaps = refreshTimes.slice(1, count).map((t, i) => t - refreshTimes[i]).sort((x, y) => x - y)
    const medianGap = gaps[Math.floor(gaps.length / 2)]
    assert.ok(medianGap >= REFRESH / 2 - 10 && medianGap <= REFRESH * 2, `median gap ${medianGap} ms`)

    // Right after a refresh the TTL is back near lock_ttl_ms.
    const sortedAfter = [...afterRefresh].sort((x, y) => x - y)
    const medianAfter = sortedAfter[Math.floor(sortedAfter.length / 2)]
    assert.ok(medianAfter >= TTL - 60, `median PTTL right after a refresh: ${medianAfter}`)

    // After release: no more refreshes, keys gone.
    const releasedAt = refreshTimes.length
    await sleep(400)
    assert.ok(refreshTimes.length <= releasedAt + 1, 'at most one in-flight refresh lands after release')
    assert.equal(await raw.exists(key, ownerKey(key)), 0)
  })

  test('refreshes come every lock_refresh_ms, never sooner, even beside other locks due in between', async () => {
    // Several holds on one connection, started 1.2 s apart: each one's refresh falls in the
    // others' intervals, where a watchdog batching refreshes early would take them along.
    const TTL = 4000
    const REFRESH = 3000
    const STAGGER = 1200
    const READ_AT = 2100 // well inside the first interval, 900 ms before the refresh is due
    const holds = []
    for (let i = 0; i < 4; i++) {
      if (i > 0) await sleep(STAGGER)
      const lock = make({ name: `punctual ${i}`, lock_ttl_ms: TTL, lock_refresh_ms: REFRESH })
      const hold = { lock, refreshes: [], called: performance.now(), pttl: null }
      lock.on('refreshed', () => hold.refreshes.push(performance.now()))
      assert.equal(await lock.acquire(), true)
      hold.acquired = performance.now()
      hold.read = sleep(READ_AT).then(async () => {
        const asked = performance.now()
        hold.pttl = { ttl: await raw.pttl(lock.key), after: asked - hold.acquired }
      })
      holds.push(hold)
    }
    const last = holds[holds.length - 1]
    await waitFor(() => last.refreshes.length >= 1, REFRESH + 5000, 'the last hold refreshed')
    await Promise.all(holds.map((hold) => hold.read))
    for (const hold of holds) await hold.lock.release()

    for (const [i, hold] of holds.entries()) {
      // Set no sooner than acquire() was called and not refreshed since: at most the TTL less
      // the time from acquire()'s answer to the read.
      const { ttl, after } = hold.pttl
      assert.ok(ttl <= TTL - after + 5, `hold ${i}: PTTL ${ttl} read ${after.toFixed(0)} ms after acquire()`)
      assert.ok(hold.refreshes.length >= 1, `hold ${i} was never refreshed`)
      const first = hold.refreshes[0] - hold.called
      assert.ok(first >= REFRESH - 10, `hold ${i}: first refreshed ${first.toFixed(0)} ms after acquire()`)
      const gaps = hold.refreshes.slice(1).map((t, k) => t - hold.refreshes[k])
      for (const gap of gaps) assert.ok(gap >= REFRESH - MARGIN, `hold ${i}: refreshed ${gap.toFixed(0)} ms apart`)
    }
  })

  test('max_stall_ms 0 disables the stall guard: a 2.2 s blocked JS thread keeps the lock (ttl 600)', async () => {
    const lock = make({ name: 'no stall guard', lock_ttl_ms: 600, lock_refresh_ms: 100, max_stall_ms: 0 })
    const events = record(lock)
    await lock.acquire()
    const until = Date.now() + 2200 // > 3 x ttl, the default stall budget
    while (Date.now() < until) {
      // block the JS thread
    }
    await sleep(300)
    assert.deepEqual(ofType(events, 'error'), [])
    assert.equal(lock.acquired, true)
    const ttl = await raw.pttl(lock.key)
    assert.ok(ttl > 200, `the native refresh went on while JS was blocked (PTTL ${ttl})`)
    await lock.release()
  })
})

describe('losing the lock', () => {
  /** Acquires, waits for steady refreshes, runs `act`, returns what happened. */
  async function loseBy(name, act, { ttl = 2000, refresh = 200, errors = 1, extra = {} } = {}) {
    const lock = make({ name, lock_ttl_ms: ttl, lock_refresh_ms: refresh, ...extra })
    const events = record(lock)
    assert.equal(await lock.acquire(), true)
    const token = await raw.get(ownerKey(lock.key))
    await waitForEvents(events, 'refreshed', 2, 2000)
    const actedAt = performance.now()
    const actResult = await act(lock)
    const actDone = performance.now()
    await waitForEvents(events, 'error', errors, ttl + 3000)
    const error = ofType(events, 'error')[0]
    const lastRefresh = ofType(events, 'refreshed').filter((e) => e.at < error.at).at(-1)
    return { lock, events, token, actedAt, actDone, actResult, error, lastRefresh }
  }

  /** The common facts of any loss: LockLostError within bound, then released, no refresh after. */
  async function assertLossThenRelease(r, reason) {
    const { lock, events, error, lastRefresh, token } = r
    assertLost(error.args[0], lock)
    assert.match(error.args[0].message, reason)
    assert.ok(!error.args[0].message.includes(token), 'the token is not in the message')
    assert.ok(
      error.at - lastRefresh.at <= lock.lock_ttl_ms + MARGIN,
      `lost ${Math.round(error.at - lastRefresh.at)} ms after the last refresh (ttl ${lock.lock_ttl_ms})`,
    )
    await waitForEvents(events, 'released', 1, 3000)
    const types = events.map((e) => e.type)
    assert.match(types.join(','), /^acquired(,refreshed)+,error,released$/)
    assert.deepEqual(events.at(-1).args, [lock.key])
    assert.equal(lock.acquired, false)
    assert.equal(lock.fence, null)
  }

  test('lock key deleted: ELOST at the next tick, then released', async () => {
    const r = await loseBy('lost deleted', (lock) => raw.del(lock.key))
    await assertLossThenRelease(r, /gone or no longer ours/)
    assert.ok(r.error.at - r.actedAt <= 2 * 200 + MARGIN, `noticed ${Math.round(r.error.at - r.actedAt)} ms after the DEL`)
    assert.equal(await raw.exists(r.lock.key, ownerKey(r.lock.key)), 0, 'the owner key is cleaned up too')
    assert.equal(await r.lock.acquire(), true, 'a later acquire works')
    await r.lock.release()
  })

  test('lock key overwritten with another value: ELOST, and the new value is neither deleted nor extended', async () => {
    const r = await loseBy('lost overwritten', (lock) => raw.set(lock.key, 'someone-else'))
    await assertLossThenRelease(r, /gone or no longer ours/)
    assert.ok(r.error.at - r.actedAt <= 2 * 200 + MARGIN, `noticed ${Math.round(r.error.at - r.actedAt)} ms after the SET`)
    assert.equal(await raw.get(r.lock.key), 'someone-else')
    assert.equal(await raw.pttl(r.lock.key), -1, 'no TTL was put on the stranger value')
    assert.equal(await r.lock.acquire(), false, 'the lock is taken by the stranger')
    await raw.del(r.lock.key)
    assert.equal(await r.lock.acquire(), true, 'a later acquire works once it is free')
    await r.lock.release()
  })

  test('owner key deleted: ELOST; the lock key is left to expire, never extended', async () => {
    const r = await loseBy('lost owner', (lock) => raw.del(ownerKey(lock.key)))
    await assertLossThenRelease(r, /gone or no longer ours/)
    assert.ok(r.error.at - r.actedAt <= 2 * 200 + MARGIN)
    const ttl1 = await raw.pttl(r.lock.key)
    await sleep(300)
    const ttl2 = await raw.pttl(r.lock.key)
    assert.ok(ttl2 < ttl1 || ttl2 === -2, `PTTL keeps falling (${ttl1} -> ${ttl2})`)
    await waitFor(async () => (await raw.exists(r.lock.key)) === 0, 2000 + MARGIN, 'the lock key to expire')
    assert.equal(await r.lock.acquire(), true, 'a later acquire works')
    await r.lock.release()
  })

  test('max_hold_ms: ELOST once held that long, then released', async () => {
    const started = performance.now()
    const r = await loseBy('lost max hold', () => {}, { ttl: 1000, refresh: 200, extra: { max_hold_ms: 900 } })
    await assertLossThenRelease(r, /max_hold_ms/)
    const heldFor = r.error.at - started
    assert.ok(heldFor >= 850 && heldFor <= 900 + MARGIN, `lost after ${Math.round(heldFor)} ms`)
    assert.equal(await raw.exists(r.lock.key, ownerKey(r.lock.key)), 0)
    assert.equal(await r.lock.acquire(), true)
    await r.lock.release()
  })

  test('max_stall_ms: a JS thread blocked past it loses the lock (ELOST right after), then released', async () => {
    let blockEnd
    const r = await loseBy(
      'lost stall',
      () => {
        const until = Date.now() + 800
        while (Date.now() < until) {
          // block the JS thread past max_stall_ms
        }
        blockEnd = performance.now()
      },
      { ttl: 1500, refresh: 200, extra: { max_stall_ms: 300 } },
    )
    await assertLossThenRelease(r, /blocked for longer than its stall budget/)
    assert.ok(r.error.at >= blockEnd && r.error.at - blockEnd <= MARGIN, 'reported as soon as JS runs again')
    assert.equal(await raw.exists(r.lock.key, ownerKey(r.lock.key)), 0)
    assert.equal(await r.lock.acquire(), true)
    await r.lock.release()
  })

  redisOnly('two concurrent acquire() calls on one instance: one wins, and the winner still reports refreshes and loss', async () => {
    const lock = make({ name: 'concurrent acquire', lock_ttl_ms: 2000, lock_refresh_ms: 200 })
    // Warm up, so each attempt below is a single EVALSHA: the acquire script is cached in
    // Redis, and a lock held meanwhile keeps the connection's refresh scheduler (and its
    // loaded script) alive.
    const keeper = make({ name: 'concurrent acquire keeper' })
    assert.equal(await keeper.acquire(), true)
    assert.equal(await lock.acquire(), true)
    await lock.release()
    const events = record(lock)
    // Redis paused, so both attempts queue on the connection in call order: the first wins,
    // as two SET NX on one ioredis connection do for the original.
    backend.server.pause()
    let first
    let second
    try {
      first = lock.acquire()
      await sleep(50)
      second = lock.acquire()
      await sleep(50)
    } finally {
      backend.server.resume()
    }
    const results = await Promise.all([first, second])
    assert.deepEqual(results, [true, false])
    assert.equal(lock.acquired, true)
    assert.equal(ofType(events, 'acquired').length, 1)
    try {
      await sleep(600) // a few refresh periods
      await raw.del(lock.key)
      // The winner must still learn that its lock is gone.
      await waitForEvents(events, 'error', 1, 2000 + MARGIN)
      assertLost(ofType(events, 'error')[0].args[0], lock)
      await waitForEvents(events, 'released', 1, 2000)
      assert.equal(lock.acquired, false)
      assert.ok(ofType(events, 'refreshed').length >= 1, "and its 'refreshed' events reached JS")
    } finally {
      await keeper.release()
    }
  })

  /** Fixture `fixture` holding lock `name` on this backend, as a child: its output so far, its exit. */
  function fixtureChild(fixture, name) {
    const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', fixture)], {
      env: { ...process.env, REDIS_URL: backend.url, LOCK_NAME: name },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    children.add(child)
    const out = { stdout: '', stderr: '' }
    child.stdout.on('data', (d) => (out.stdout += d))
    child.stderr.on('data', (d) => (out.stderr += d))
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
    return { child, out, exited }
  }

  test("an 'error' caught by an uncaughtException handler: the lock is still released, and the process exits", async () => {
    const { child, out, exited } = fixtureChild('exclusive-caught.js', 'lost caught')
    // Held for max_hold_ms (300 ms), then lost; a release that never comes keeps it alive.
    const exit = await Promise.race([exited, sleep(10_000).then(() => null)])
    children.delete(child)
    if (!exit) child.kill('SIGKILL')
    assert.deepEqual(
      out.stdout.trim().split('\n'),
      ['held true', 'caught ELOST', 'released exclusive-lock:lost-caught', 'acquired false'],
      `exit ${JSON.stringify(exit)}\n${out.stderr}`,
    )
    assert.equal(exit?.code, 0, out.stderr)
  })

  redisOnly("no 'error' listener: the loss crashes the process, as the original's refresh failure did", async () => {
    const { child, out, exited } = fixtureChild('exclusive-unhandled.js', 'lost unhandled')
    await waitFor(() => out.stdout.includes('held') || child.exitCode !== null, 10000, 'the child to hold the lock')
    assert.equal(out.stdout.trim(), 'held true', out.stderr)
    await raw.del('exclusive-lock:lost-unhandled')
    const exit = await Promise.race([exited, sleep(5000).then(() => null)])
    children.delete(child)
    if (!exit) {
      child.kill('SIGKILL')
      assert.fail('the child kept running after losing its lock with no error listener')
    }
    assert.equal(exit.code, 1, out.stderr)
    assert.match(out.stderr, /LockLostError/)
    assert.match(out.stderr, /ELOST/)
  })

  redisOnly("Redis restarted empty: suspended, one 'error' (ELOST), then 'released': the release that finds it gone is no second 'error'", async () => {
    const lock = make({ name: 'lost restarted', lock_ttl_ms: 2000, lock_refresh_ms: 200 })
    const events = record(lock)
    const doubts = []
    lock.on('suspended', () => doubts.push('suspended'))
    lock.on('resumed', () => doubts.push('resumed'))
    assert.equal(await lock.acquire(), true)
    await waitForEvents(events, 'refreshed', 1, 2000)
    await backend.server.restart()
    await waitForEvents(events, 'released', 1, 5000)
    // Long enough for a second 'error' (the original's comes right after the first).
    await sleep(300)
    const errors = ofType(events, 'error')
    assert.deepEqual(
      errors.map((e) => e.args[0].code),
      ['ELOST'],
      `errors: ${errors.map((e) => e.args[0].message).join('; ')}`,
    )
    assert.equal(doubts[0], 'suspended')
    assert.deepEqual(
      events.filter((e) => e.type !== 'refreshed').map((e) => e.type),
      ['acquired', 'error', 'released'],
    )
    assert.equal(lock.acquired, false)
  })

  redisOnly('Redis stopped: ELOST at the deadline (ttl after the last refresh), the failed release is a second error', async () => {
    const TTL = 1000
    let stoppedAt
    const r = await loseBy(
      'lost stopped',
      async () => {
        await backend.server.stop()
        stoppedAt = performance.now()
      },
      { ttl: TTL, refresh: 200 },
    )
    try {
      const { lock, events, error, lastRefresh } = r
      assertLost(error.args[0], lock)
      assert.match(error.args[0].message, /TTL ran out/)
      const sinceRefresh = error.at - lastRefresh.at
      assert.ok(
        sinceRefresh >= TTL - MARGIN && sinceRefresh <= TTL + MARGIN,
        `lost ${Math.round(sinceRefresh)} ms after the last refresh: at the deadline, not before, not much after`,
      )
      assert.ok(error.at >= stoppedAt - 50, 'not before the outage')
      // The automatic release cannot reach Redis: a second 'error', and no 'released'.
      await waitForEvents(events, 'error', 2, 8000)
      const second = ofType(events, 'error')[1].args[0]
      assert.ok(second instanceof LockError, `second error: ${second?.name}`)
      assert.ok(['ECONNECTION', 'ETIMEDOUT'].includes(second.code), second.code)
      assert.equal(second.key, lock.key, 'it names its lock, as the loss does (and as the types say)')
      assert.deepEqual(ofType(events, 'released'), [])
      assert.equal(lock.acquired, false)
      assert.equal(lock.fence, null)
      assert.deepEqual(
        events.filter((e) => e.type !== 'refreshed').map((e) => e.type),
        ['acquired', 'error', 'error'],
      )
      assert.equal(ofType(events, 'refreshed').filter((e) => e.at > error.at).length, 0)
    } finally {
      await backend.server.start()
    }
    // Once Redis is back, acquire works again (the first call may still see the old outage).
    const deadline = performance.now() + 3000
    let acquired
    for (;;) {
      try {
        acquired = await r.lock.acquire()
        break
      } catch (err) {
        assert.ok(['ECONNECTION', 'ETIMEDOUT'].includes(err.code), `${err.code}: ${err.message}`)
        assert.ok(performance.now() < deadline, 'acquire still failing 3 s after Redis came back')
        await sleep(100)
      }
    }
    assert.equal(acquired, true)
    await r.lock.release()
  })

  redisOnly("Redis stopped: from the loss 'acquired' is false, and an acquire() made in the 'error' listener is never a stale true", async () => {
    const lock = make({ name: 'lost then acquire', lock_ttl_ms: 1000, lock_refresh_ms: 200 })
    const seen = []
    let again = null
    lock.on('error', (err) => {
      seen.push([err.code, lock.acquired])
      // At once, as a caller retrying on the loss would; the automatic release (which cannot
      // reach Redis) is still on its way.
      again ??= lock.acquire().then(
        (value) => ['resolved', value],
        (e) => ['rejected', e.code],
      )
    })
    assert.equal(await lock.acquire(), true)
    await sleep(300)
    await backend.server.stop()
    try {
      const until = performance.now() + 8000
      while (seen.length < 2 && performance.now() < until) await sleep(20)
      assert.deepEqual(seen[0], ['ELOST', false], 'acquired read true as the loss was told')
      assert.ok(again, 'no acquire() was made')
      const outcome = await again
      // Redis is down: the attempt after the release fails; "already acquired" (true) would be a lie.
      assert.notDeepEqual(outcome, ['resolved', true], 'acquire() in the listener answered true with Redis down')
      assert.equal(lock.acquired, false)
    } finally {
      await backend.server.start()
    }
  })

  redisOnly('Redis restarted empty: ELOST at the next tick after it is back, then released; acquire works again', async () => {
    let restartedAt
    const r = await loseBy(
      'lost restarted',
      async () => {
        await backend.server.restart()
        restartedAt = performance.now()
      },
      { ttl: 3000, refresh: 200 },
    )
    await assertLossThenRelease(r, /gone or no longer ours|TTL ran out/)
    assert.ok(
      r.error.at - restartedAt <= 2 * 200 + MARGIN + 800,
      `noticed ${Math.round(r.error.at - restartedAt)} ms after the restart`,
    )
    assert.equal(await raw.exists(r.lock.key, ownerKey(r.lock.key)), 0)
    assert.equal(await r.lock.acquire(), true)
    assert.equal(await raw.get(r.lock.key), '1')
    await r.lock.release()
  })
})
