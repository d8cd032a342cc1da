'use strict'

// lock()'s "N attempts": an attempt made because a release woke the waiter does not count
// toward maxRetries nor toward the N of "Failed to acquire lock after N attempts". Here the
// wakes are sent while the lock is still held (as our release script sends them: the waiter's
// member, popped from the lock's queue, on the lock's channel), so each woken attempt fails
// and lock() ends by its retries; the server's count of script calls shows the attempts ran.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const sg = require('../syncguard')

let server
let raw

before(async () => {
  server = await startRedis()
  raw = new Redis({ port: server.port, lazyConnect: true })
  await raw.connect()
})

after(async () => {
  raw.disconnect()
  await server.close()
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Script calls the server has run so far. */
async function scriptCalls() {
  const stats = await raw.info('commandstats')
  let calls = 0
  for (const name of ['evalsha', 'eval']) {
    const match = stats.match(new RegExp(`cmdstat_${name}:calls=(\\d+)`))
    if (match) calls += Number(match[1])
  }
  return calls
}

/** Wakes every waiter queued on `lockKey` as a release would, leaving the lock held. */
async function wakeQueued(lockKey) {
  const queue = Buffer.concat([Buffer.from(`{${lockKey}}`), Buffer.from([0xff]), Buffer.from('waiting')])
  const members = await raw.zrangeBuffer(queue, 0, -1)
  await raw.zrem(queue, ...members)
  for (const member of members) await raw.call('SPUBLISH', `{${lockKey}}:released`, member)
  return members.length
}

test('woken attempts that fail leave maxRetries and the "N attempts" of AcquisitionTimeout unchanged', async () => {
  const backend = sg.createRedisBackend(server.url)
  const key = 'wake-count'
  const holder = await backend.acquire({ key, ttlMs: 30_000 })
  assert.equal(holder.ok, true)
  const started = Date.now()
  const acquisition = { maxRetries: 1, retryDelayMs: 1500, backoff: 'fixed', jitter: 'none', timeoutMs: 10_000 }
  const waiting = sg.lock(backend, () => 'never', { key, acquisition })
  const outcome = waiting.then(
    () => assert.fail('lock() won a held lock'),
    (err) => err,
  )

  await sleep(300)
  const before = await scriptCalls()
  let woken = 0
  for (let i = 0; i < 2; i++) {
    // Let the waiter queue again after the previous woken attempt.
    for (let tries = 0; tries < 50; tries++) {
      const n = await wakeQueued(`syncguard:${key}`)
      if (n > 0) {
        woken += n
        break
      }
      await sleep(20)
    }
    await sleep(150)
  }
  assert.equal(woken, 2, 'the waiter was queued, and woken twice')
  // Each woken attempt is one script call at least (the attempt; re-queueing may be another).
  assert.ok((await scriptCalls()) - before >= 2, 'the woken attempts ran')
  assert.ok(Date.now() - started < 1400, 'both wakes came before the first backoff ended')

  const err = await outcome
  assert.ok(err instanceof sg.LockError, String(err))
  assert.equal(err.code, 'AcquisitionTimeout')
  assert.equal(err.message, 'Failed to acquire lock after 2 attempts (lock contention)')
  assert.ok(Date.now() - started >= 1400, 'lock() waited out its one backoff: the wakes did not use its retry')
  await holder.release()
})
