'use strict'

// 10,000 ExclusiveLocks held through one connection: all refreshed every period, in a small
// number of pipelines per tick (counted by the native watchdog), none lost.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const ExclusiveLock = require('../exclusive-lock')
const { watchdogStats } = require('../lib/native')
const { startRedis } = require('./helpers/redis-server')

const HELD = 10_000
const TTL_MS = 1500
const REFRESH_MS = 500

let server
let admin

before(async () => {
  server = await startRedis()
  admin = new Redis(server.port, '127.0.0.1')
})

after(async () => {
  admin.disconnect()
  await server.close()
})

test('10,000 held locks are refreshed each period in a handful of pipelines', async () => {
  const url = server.url
  const locks = Array.from(
    { length: HELD },
    (_, i) => new ExclusiveLock({ name: `many-${i}`, cache_connection: url, lock_ttl_ms: TTL_MS, lock_refresh_ms: REFRESH_MS }),
  )
  let lost = 0
  for (const lock of locks) lock.on('error', () => lost++)
  for (let i = 0; i < HELD; i += 1000) {
    const won = await Promise.all(locks.slice(i, i + 1000).map((lock) => lock.acquire()))
    assert.ok(won.every(Boolean))
  }

  await new Promise((resolve) => setTimeout(resolve, 2 * REFRESH_MS))
  const before = watchdogStats({ url })
  await new Promise((resolve) => setTimeout(resolve, 6 * REFRESH_MS))
  const after = watchdogStats({ url })

  const refreshes = after.refreshes - before.refreshes
  const pipelines = after.pipelines - before.pipelines
  assert.equal(after.watched, HELD)
  assert.equal(lost, 0)
  // Six refresh periods: every lock refreshed about six times (up to half a period early).
  assert.ok(refreshes >= HELD * 5, `${refreshes} refreshes`)
  // Far from one round trip per lock: a few ticks per period, each a pipeline per 1,024 locks
  // due (the watchdog's chunk, which keeps a tick's memory small).
  assert.ok(pipelines <= 6 * 3 * Math.ceil(HELD / 1024), `${pipelines} pipelines for ${refreshes} refreshes`)
  assert.ok(refreshes / pipelines >= 500, `${(refreshes / pipelines).toFixed(0)} refreshes per round trip`)

  // Long after the first TTL ran out, every lock is still in Redis.
  const sample = await admin.pttl('exclusive-lock:many-0')
  const last = await admin.pttl(`exclusive-lock:many-${HELD - 1}`)
  assert.ok(sample > 0 && last > 0, `${sample} ${last}`)

  for (let i = 0; i < HELD; i += 1000) await Promise.all(locks.slice(i, i + 1000).map((lock) => lock.release()))
  assert.equal(watchdogStats({ url }).watched, 0)
  const leftovers = (await admin.keys('*')).filter((k) => !k.endsWith('\ufffdfence'))
  assert.deepEqual(leftovers, [], 'only the fence counters remain')
  assert.equal(await admin.dbsize(), HELD)
})
