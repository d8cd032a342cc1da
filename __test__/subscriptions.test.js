'use strict'

// What a connection leaves subscribed on the server once its waiters are done: channels of
// locks nobody waits for are dropped (at most a few dozen kept for the next wait), however
// many locks were waited for at once. Needs a Redis server (PUBSUB): memory:// has none.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { DistributedLock } = require('..')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')

const KEYS = 3000
const ROUNDS = 3
// Kept for the next wait (64, backend/link.rs), and as many again between two clean-ups.
const LEFT_AT_MOST = 200

let server
let admin

before(async () => {
  server = await startRedis()
  admin = new Redis(server.port, { lazyConnect: true })
  await admin.connect()
})

after(async () => {
  admin.disconnect()
  await server.close()
})

const subscribed = async () =>
  (await admin.pubsub('CHANNELS')).length + (await admin.call('PUBSUB', 'SHARDCHANNELS')).length

/** The channel count once it is at most `limit`, or the last count read after `withinMs`. */
async function settledCount(limit, withinMs) {
  const deadline = Date.now() + withinMs
  for (;;) {
    const count = await subscribed()
    if (count <= limit || Date.now() > deadline) return count
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

for (const [name, options] of [['default', {}], ['retryDelayMs', { retryDelayMs: 1000 }]]) {
  test(`rounds of ${KEYS} waits on distinct keys leave no pile of subscriptions (${name})`, async () => {
    const holder = new DistributedLock(server.url)
    const waiter = new DistributedLock(server.url, options)
    const counts = []
    for (let round = 0; round < ROUNDS; round++) {
      const keys = Array.from({ length: KEYS }, (_, i) => `subs:${name}:${round}:${i}`)
      const held = await Promise.all(keys.map((key) => holder.acquire(key, 30_000)))
      const waits = keys.map((key) => waiter.waitForLock(key, 30_000, 60_000))
      // Every waiter has made its first attempt and found the lock held.
      await new Promise((resolve) => setTimeout(resolve, 200))
      await Promise.all(held.map((handle) => handle.release()))
      const won = await Promise.all(waits)
      await Promise.all(won.map((handle) => handle.release()))
      counts.push(await settledCount(LEFT_AT_MOST, 5000))
    }
    assert.ok(
      counts.every((count) => count <= LEFT_AT_MOST),
      `channels still subscribed after each round: ${counts.join(', ')}`,
    )
    // Nor does the connection stay queued for locks nobody here waits for.
    assert.deepEqual(await admin.keys(`*waiting*subs:${name}:*`), [])
  })
}
