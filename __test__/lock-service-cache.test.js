'use strict'

// maestro's DistributedLockService with a cache object whose Redis connection we cannot
// read: driven through the object's own setIfNotExists / get / del / expire with maestro's
// protocol, refreshed on a native schedule. The cache here is a real one: a closure over an
// ioredis client to a private redis-server (seconds, as maestro's RedisCacheClient sends).
// Also: the public fields are plain properties, a release wins over an acquisition in flight
// (on both paths), and disconnect() never rejects.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')

for (const name of Object.keys(process.env)) if (name.startsWith('MO_')) delete process.env[name]
process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS = '20'
process.env.MO_BACKOFF_MAX_DELAY_MS = '40'
const DistributedLockService = require('../maestro')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let server
let redis
const services = []
let keyCount = 0
const freshKey = (label) => `cache-test:${label}:${++keyCount}`

/** A cache in maestro's shape whose Redis client is out of our sight. */
function closureCache(calls = []) {
  const client = redis
  const record = (name, fn) => async (...args) => {
    calls.push([name, ...args])
    return fn(...args)
  }
  return {
    calls,
    isConnected: true,
    setIfNotExists: record('setIfNotExists', async (key, value, ttlMs) => (await client.set(key, value, 'EX', Math.ceil(ttlMs / 1000), 'NX')) === 'OK'),
    get: record('get', (key) => client.get(key)),
    del: record('del', (key) => client.del(key)),
    expire: record('expire', (key, ttlMs) => client.expire(key, Math.ceil(ttlMs / 1000))),
    disconnect: record('disconnect', async () => {}),
  }
}

/** maestro's logger service shape, recording. */
function maestroLogger() {
  const lines = []
  const level = (name) => (...args) => lines.push([name, ...args])
  return { lines, logDebug: level('debug'), logInfo: level('info'), logWarning: level('warn'), logError: level('error') }
}

function service(key, ttl, cache, logger) {
  const s = new DistributedLockService(key, ttl, cache, { logger })
  services.push(s)
  return s
}

before(async () => {
  server = await startRedis()
  redis = new Redis(server.url)
})

after(async () => {
  for (const s of services) await s.release()
  redis?.disconnect()
  await server?.close()
})

describe('a cache object we cannot read: its own methods, maestro\'s protocol', () => {
  test('acquire sets lockValue through setIfNotExists; release GETs then DELs; nothing else is sent', async () => {
    const key = freshKey('protocol')
    const cache = closureCache()
    const logger = maestroLogger()
    const s = service(key, 3000, cache, logger)
    assert.equal(await s.acquire(), true)
    assert.equal(s.isLocked, true)
    assert.ok(s.refreshInterval, 'refreshInterval is set while held')
    assert.equal(await redis.get(key), s.lockValue)
    assert.deepEqual(cache.calls[0], ['setIfNotExists', key, s.lockValue, 3000])
    assert.equal(await s.release(), true)
    assert.equal(await redis.exists(key), 0)
    assert.equal(s.isLocked, false)
    assert.equal(s.refreshInterval, null)
    assert.deepEqual(cache.calls.map(([name]) => name), ['setIfNotExists', 'get', 'del'])
    assert.ok(logger.lines.some(([level, text]) => level === 'debug' && text === `Lock acquired successfully: ${key}`))
    assert.ok(logger.lines.some(([level, text]) => level === 'debug' && text === `Lock released: ${key}`))
  })

  test('the refresh runs on a native schedule: GET then EXPIRE every third of the TTL, keeping the lock', async () => {
    const key = freshKey('refresh')
    const cache = closureCache()
    const s = service(key, 1500, cache)
    assert.equal(await s.acquire(), true)
    await sleep(1800)
    const refreshes = cache.calls.filter(([name]) => name === 'expire')
    assert.ok(refreshes.length >= 2, `${refreshes.length} refreshes in 1.8 s at TTL 1500`)
    assert.deepEqual(refreshes[0], ['expire', key, 1500])
    assert.equal(await redis.get(key), s.lockValue, 'the lock outlived its TTL')
    await s.release()
    const after = cache.calls.length
    await sleep(700)
    assert.equal(cache.calls.length, after, 'refreshed after release')
  })

  test('a lock whose value changed is lost: isLocked false, refresh stopped, warned', async () => {
    const key = freshKey('lost')
    const logger = maestroLogger()
    const s = service(key, 900, closureCache(), logger)
    assert.equal(await s.acquire(), true)
    await redis.set(key, 'someone-else', 'EX', 10)
    for (let i = 0; i < 100 && s.isLocked; i++) await sleep(20)
    assert.equal(s.isLocked, false)
    assert.equal(s.getStatus().hasAutoRefresh, false)
    assert.ok(logger.lines.some(([level, text]) => level === 'warn' && text === `Lock lost: ${key}`))
    assert.equal(await s.release(), true, 'not locked: release() is true at once')
    assert.equal(await redis.get(key), 'someone-else', "the other holder's lock is left alone")
  })

  test('contention: a second instance waits with backoff and gets it after the release', async () => {
    const key = freshKey('contend')
    const a = service(key, 3000, closureCache())
    const b = service(key, 3000, closureCache())
    assert.equal(await a.acquire(), true)
    assert.equal(await b.acquire(3000, 150), false)
    const waiting = b.acquire(3000, 2000)
    await sleep(100)
    await a.release()
    assert.equal(await waiting, true)
    assert.equal(await redis.get(key), b.lockValue)
  })

  test("a cache error is logged and acquire() resolves false, as maestro's", async () => {
    const logger = maestroLogger()
    const cache = closureCache()
    cache.setIfNotExists = async () => {
      throw new Error('cache down')
    }
    const s = service(freshKey('error'), 1000, cache, logger)
    assert.equal(await s.acquire(), false)
    assert.ok(logger.lines.some(([level, text, err]) => level === 'error' && text.startsWith('Lock acquisition error for') && err?.message === 'cache down'))
  })

  test('a disconnected cache is connected first (maestro reads isConnected as a field)', async () => {
    const cache = closureCache()
    let connects = 0
    cache.isConnected = false
    cache.connect = async () => {
      connects++
      cache.isConnected = true
    }
    const s = service(freshKey('connect'), 1000, cache)
    assert.equal(await s.acquire(), true)
    assert.equal(connects, 1)
    await s.release()
  })
})

describe('plain fields, as maestro\'s users read and assign them', () => {
  test('lockKey and ttl assigned between acquisitions are used; lockValue is what Redis holds; isLocked is writable', async () => {
    const s = service(freshKey('fields-a'), 2000, server.url)
    const key = freshKey('fields-b')
    s.lockKey = key
    s.ttl = 5000
    assert.equal(await s.acquire(), true)
    assert.equal(await redis.get(key), s.lockValue)
    const pttl = await redis.pttl(key)
    assert.ok(pttl > 4000 && pttl <= 5000, `PTTL ${pttl}`)
    assert.deepEqual(Object.keys(s).sort(), ['cacheLayer', 'isLocked', 'lockKey', 'lockValue', 'refreshInterval', 'ttl'])
    assert.ok(s.refreshInterval)
    assert.equal(await s.release(), true)
    assert.equal(s.isLocked, false)
    assert.equal(s.refreshInterval, null)
    assert.equal(await redis.exists(key), 0)
    s.isLocked = true
    assert.equal(s.getStatus().isLocked, true, 'an assigned isLocked reads back')
    s.isLocked = false
  })
})

describe('a release() made while acquire() is in flight wins', () => {
  for (const [path, cache] of [['native', () => server.url], ['cache object', () => closureCache()]]) {
    test(`${path}: the acquisition ends released, the wait is cut short, nothing is held`, async () => {
      const key = freshKey(`release-wins-${path}`)
      const holder = service(key, 5000, cache())
      assert.equal(await holder.acquire(), true)
      const s = service(key, 5000, cache())
      const started = performance.now()
      const acquiring = s.acquire(5000, 10_000)
      await sleep(50)
      assert.equal(await s.release(), true)
      assert.equal(await acquiring, false)
      assert.ok(performance.now() - started < 1000, 'the wait went on after release()')
      await holder.release()
      // Free now; an acquisition released at once leaves nothing behind.
      for (let round = 0; round < 10; round++) {
        const p = s.acquire(5000, 1000)
        for (let i = 0; i < round % 3; i++) await null
        await s.release()
        assert.equal(await p, false, `round ${round}: the acquisition won over the release`)
        assert.equal(s.isLocked, false)
        assert.equal(await redis.exists(key), 0, `round ${round}: a lock was left behind`)
      }
    })
  }
})

describe('disconnect()', () => {
  test('never rejects because release() failed: it warns and still disconnects the cache', async () => {
    const logger = maestroLogger()
    const cache = closureCache()
    const s = service(freshKey('disconnect'), 1000, cache, logger)
    assert.equal(await s.acquire(), true)
    const release = s.release
    s.release = async () => {
      throw new Error('release failed')
    }
    await s.disconnect()
    assert.ok(logger.lines.some(([level, text]) => level === 'warn' && text.startsWith('Error releasing lock during disconnect')))
    assert.ok(cache.calls.some(([name]) => name === 'disconnect'), 'the cache was not disconnected')
    assert.equal(s.isLocked, false)
    s.release = release
  })
})

describe("maestro's field semantics", () => {
  test('isLocked set false by hand ends the refresh: the lock is left to expire, release() deletes nothing', async () => {
    const key = freshKey('hand-unlocked')
    const s = service(key, 900, server.url)
    assert.equal(await s.acquire(), true)
    s.isLocked = false
    // The next refresh sees it (every 300 ms); the key then expires by its TTL.
    const deadline = performance.now() + 3000
    while ((await redis.exists(key)) === 1 && performance.now() < deadline) await sleep(50)
    assert.equal(await redis.exists(key), 0, 'the native refresh went on after isLocked = false')
    assert.equal(s.refreshInterval, null)
    assert.equal(await s.release(), true)
  })

  test('a cacheLayer assigned after construction is used, refreshed and released', async () => {
    const key = freshKey('late-cache')
    const s = service(key, 900, null)
    const cache = closureCache()
    s.cacheLayer = cache
    assert.equal(await s.acquire(), true)
    await sleep(1300)
    assert.ok(cache.calls.some(([name]) => name === 'expire'), 'never refreshed')
    assert.equal(await redis.get(key), s.lockValue)
    assert.equal(await s.release(), true)
    assert.equal(await redis.exists(key), 0)
  })

  test('no cache: release() of a hand-set isLocked is true; false, 0 and "" are no cache, as in maestro', async () => {
    const logger = maestroLogger()
    const s = service(freshKey('none'), 1000, null, logger)
    s.isLocked = true
    assert.equal(await s.release(), true)
    assert.equal(s.isLocked, false)
    assert.equal(await s.acquire(), false)
    assert.deepEqual(logger.lines.slice(-3).map(([level]) => level), ['warn', 'error', 'warn'])
    for (const none of [false, 0, '']) {
      const quiet = service(freshKey('falsy'), 1000, none)
      assert.equal(await quiet.acquire(), false)
      assert.equal(quiet.getStatus().hasCacheLayer, false)
    }
  })

  test('acquire() arguments that are not numbers are a TypeError naming them, before any call', async () => {
    const s = service(freshKey('bad-args'), 1000, server.url)
    await assert.rejects(s.acquire('5000'), { name: 'TypeError', code: 'EINVAL', argument: 'lockTtl' })
    await assert.rejects(s.acquire(1000, '10'), { name: 'TypeError', code: 'EINVAL', argument: 'maxWaitTime' })
    assert.equal(s.isLocked, false)
  })
})
