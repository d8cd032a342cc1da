'use strict'

// A Sentinel set over TLS only (1 master, 1 replica, 3 sentinels; every one `--port 0` with a
// `tls-port`, replicating and monitoring over TLS) whose certificates come from a private CA
// (helpers/tls-certs.js). The CA given with `tls` and `sentinelTLS` checks the sentinels and
// the master they name, in the options form and an ioredis Sentinel client's (a URL has no
// place for a CA: `{ url, tls }` carries it). A wrong CA fails ECONNECTION naming the
// certificate, within the connect timeout; after `SENTINEL FAILOVER` new acquisitions reach
// the new master. A second set asks every client for a certificate of the CA: `tls.cert` and
// `tls.key` are shown to the sentinels and the master alike. Servers are stopped by pid.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { RedisSentinelSet } = require('./helpers/redis-sentinel')
const { makeCerts } = require('./helpers/tls-certs')
const { DistributedLock } = require('..')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
let certs
let set
let ioredis

before(async () => {
  certs = makeCerts()
  set = await RedisSentinelSet.start({ tls: certs })
})

after(async () => {
  ioredis?.disconnect()
  await set?.close()
  certs?.cleanup()
})

/** The set named with the private CA: options, an ioredis Sentinel client, a URL. */
function forms(tls = { ca: certs.ca }) {
  ioredis ??= new Redis({ ...set.options, tls, sentinelTLS: tls, lazyConnect: true })
  return [
    ['options', { ...set.options, tls, sentinelTLS: tls }],
    ['ioredis', ioredis],
    ['url', { url: set.url, tls }],
  ]
}

test('the private CA checks the sentinels and the master: acquire and release there, a waiter woken by the release', async () => {
  const master = set.client(await set.masterPort())
  for (const [form, redis] of forms()) {
    const locks = new DistributedLock(redis, { retryDelayMs: 5000 })
    const key = `stls:${form}`
    const held = await locks.acquire(key, 10_000)
    assert.ok(await master.pttl(`lock:${key}`) > 0, `${form}: the key is not on the master`)
    const started = Date.now()
    const waiting = locks.waitForLock(key, 8000, 5000)
    await sleep(200)
    await held.release()
    const got = await waiting
    assert.ok(Date.now() - started < 3000, `${form}: woken after ${Date.now() - started} ms (the poll is 5 s)`)
    await got.release()
    assert.equal(await master.exists(`lock:${key}`), 0, `${form}: not released on the master`)
  }
})

test('sentinelTLS a copy of tls (a Buffer CA) is the same setting: accepted and used; another CA refused', async () => {
  const tls = { ca: Buffer.from(certs.ca) }
  const locks = new DistributedLock({ ...set.options, tls, sentinelTLS: { ...tls } })
  const held = await locks.acquire('stls:copy', 5000)
  assert.ok(await set.client(await set.masterPort()).pttl('lock:stls:copy') > 0, 'the key is not on the master')
  await held.release()
  assert.throws(() => new DistributedLock({ ...set.options, tls, sentinelTLS: { ca: Buffer.from(certs.otherCa) } }),
    (err) => err.code === 'EINVAL' && err.argument === 'redis.sentinelTLS')
})

test('a wrong CA, or none: ECONNECTION naming the certificate, within the connect timeout', async () => {
  const wrong = { ca: certs.otherCa }
  for (const [form, redis] of [['options', { ...set.options, tls: wrong, sentinelTLS: wrong }], ['the system roots', set.url]]) {
    const locks = new DistributedLock(redis, { connectTimeoutMs: 1000 })
    const started = Date.now()
    const err = await locks.acquire(`stls:wrong:${form}`, 5000).then(() => null, (e) => e)
    assert.ok(err, `${form}: acquired`)
    assert.equal(err.code, 'ECONNECTION', `${form}: ${err.stack}`)
    assert.match(err.message, /certificate|UnknownIssuer/i, form)
    assert.match(err.message, /mymaster/, form)
    assert.ok(Date.now() - started < 3000, `${form}: took ${Date.now() - started} ms`)
  }
})

test('after SENTINEL FAILOVER a new acquisition reaches the new master over TLS', async () => {
  const locks = new DistributedLock({ ...set.options, tls: { ca: certs.ca }, sentinelTLS: { ca: certs.ca } }, { connectTimeoutMs: 1500 })
  const before = await locks.acquire('stls:before', 5000)
  await before.release()
  const { from, to } = await set.failover()
  assert.notEqual(from, to)
  const onNew = set.client(to)
  let landed = false
  for (const deadline = Date.now() + 8000; !landed && Date.now() < deadline; await sleep(100)) {
    const got = await locks.acquire('stls:after', 5000).catch(() => null)
    landed = got !== null && (await onNew.pttl('lock:stls:after')) > 0
    await got?.release().catch(() => {})
  }
  assert.ok(landed, 'no acquisition reached the new master within 8 s')
})

test('a set that asks for client certificates: tls.cert and tls.key reach the sentinels and the master', async (t) => {
  const mtls = await RedisSentinelSet.start({ tls: certs, mtls: true })
  t.after(() => mtls.close())
  const tls = mtls.clientTls
  const locks = new DistributedLock({ ...mtls.options, tls, sentinelTLS: tls })
  const held = await locks.acquire('stls:mtls', 5000)
  assert.ok(await mtls.client(await mtls.masterPort()).pttl('lock:stls:mtls') > 0, 'the key is not on the master')
  await held.release()
  const without = new DistributedLock({ ...mtls.options, tls: { ca: certs.ca }, sentinelTLS: { ca: certs.ca } }, { connectTimeoutMs: 1000 })
  const err = await without.acquire('stls:mtls', 5000).then(() => null, (e) => e)
  assert.equal(err?.code, 'ECONNECTION', String(err?.stack))
})
