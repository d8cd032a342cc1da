'use strict'

// The JS-thread connection (src/binding/js/socket) opens with every script its calls send
// already loaded (src/core/ops/direct.rs): on a server that never saw them, no call there is
// answered NOSCRIPT and sent again through the runtime's connection. Each test has a fresh
// redis-server, since a server keeps the scripts any connection loaded.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const direct = require('./helpers/direct')
const { DistributedLock } = require('..')
const sg = require('../syncguard')

const PAIRS = 20
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A fresh server and its admin client, named as helpers/direct.js expects. */
async function fresh(t) {
  const server = await startRedis()
  const admin = new Redis(server.port, { lazyConnect: true })
  await admin.connect()
  await admin.client('SETNAME', 'test-admin')
  t.after(async () => {
    admin.disconnect()
    await server.close()
  })
  return { server, admin }
}

/** Calls of `command` and errors of `code` so far, from INFO commandstats and errorstats. */
async function counts(admin) {
  const info = (await admin.info('commandstats')) + (await admin.info('errorstats'))
  const read = (pattern) => Number(pattern.exec(info)?.[1] ?? 0)
  return {
    evalsha: read(/cmdstat_evalsha:calls=(\d+)/),
    noscript: read(/errorstat_NOSCRIPT:count=(\d+)/),
  }
}

/** Makes `call` until the JS-thread connection is open, then lets its handshake finish. */
async function openDirect(admin, call) {
  for (let tries = 0; tries < 100 && (await direct.directConnections(admin)).length === 0; tries++) {
    await call()
    await sleep(10)
  }
  assert.equal((await direct.directConnections(admin)).length, 1, 'the JS-thread connection opened')
  await sleep(100)
}

test("syncguard's acquire and release: one script each over the JS-thread connection, none refused", async (t) => {
  const { server, admin } = await fresh(t)
  const backend = sg.createRedisBackend(server.url)
  // One native connection per URL, so one JS-thread connection: opened by a DistributedLock's
  // isLocked (EXISTS), as syncguard's own calls would open it only by sending its scripts.
  const opener = new DistributedLock(server.url)
  await openDirect(admin, () => opener.isLocked('warm-up'))
  const [id] = await direct.directConnections(admin)
  const before = await counts(admin)
  for (let i = 0; i < PAIRS; i++) {
    const won = await backend.acquire({ key: `sg-pair-${i % 3}`, ttlMs: 10_000 })
    assert.equal(won.ok, true)
    assert.deepEqual(await won.release(), { ok: true })
  }
  const after = await counts(admin)
  assert.equal(after.noscript - before.noscript, 0, 'no call was answered NOSCRIPT')
  assert.equal(after.evalsha - before.evalsha, 2 * PAIRS, 'one EVALSHA per acquire and per release')
  const line = (await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `))
  assert.match(line, /cmd=evalsha/, 'the JS-thread connection sent them')
})

test("DistributedLock's extend over the JS-thread connection is not refused either", async (t) => {
  const { server, admin } = await fresh(t)
  const lock = new DistributedLock(server.url)
  await openDirect(admin, () => lock.isLocked('warm-up'))
  const before = await counts(admin)
  for (let i = 0; i < PAIRS; i++) {
    const handle = await lock.acquire(`dl-pair-${i % 3}`, 10_000)
    await handle.extend(5000)
    await handle.release()
  }
  const after = await counts(admin)
  assert.equal(after.noscript - before.noscript, 0, 'no call was answered NOSCRIPT')
})
