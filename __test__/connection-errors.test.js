'use strict'

// What a failure to connect says: which server, what is missing, and TLS on one side only
// (found out only once a call failed before the server was ever reached). Redis only: the
// memory:// backend has no network.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { startRedis } = require('./helpers/redis-server')
const { makeCerts, startTlsRedis } = require('./helpers/tls-certs')
const { DistributedLock } = require('..')

let certs
let plain
let secured
let guarded

before(async () => {
  certs = makeCerts()
  ;[plain, secured, guarded] = await Promise.all([startRedis(), startTlsRedis({ certs }), startRedis({ password: 'pw-required' })])
})

after(async () => {
  await Promise.all([plain, secured, guarded].map((server) => server?.close()))
  certs?.cleanup?.()
})

test('ECONNECTION names the host and port it could not reach', async () => {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  const err = await new DistributedLock(`redis://127.0.0.1:${port}`).acquire('k', 1000).catch((e) => e)
  assert.equal(err.code, 'ECONNECTION')
  assert.ok(err.message.includes(`127.0.0.1:${port}`), err.message)
})

test('no password for a server that requires one: EAUTH saying a password is required', async () => {
  const err = await new DistributedLock(`redis://127.0.0.1:${guarded.port}`).acquire('k', 1000).catch((e) => e)
  assert.equal(err.code, 'EAUTH')
  assert.match(err.message, /a password is required/)
  assert.doesNotMatch(err.message, /HELLO/)
  assert.ok(err.message.includes(`127.0.0.1:${guarded.port}`), err.message)
})

test('a wrong password still says the credentials were refused, never the password', async () => {
  const err = await new DistributedLock(`redis://:wrong-pw-xyz@127.0.0.1:${guarded.port}`).acquire('k', 1000).catch((e) => e)
  assert.equal(err.code, 'EAUTH')
  assert.doesNotMatch(err.message, /a password is required/)
  assert.ok(!err.message.includes('wrong-pw-xyz'))
})

for (const [label, make] of [
  ['rediss://', () => new DistributedLock({ url: `rediss://127.0.0.1:${plain.port}`, tls: { ca: certs.ca } })],
  ['{ tls: true }', () => new DistributedLock({ host: '127.0.0.1', port: plain.port, tls: true })],
]) {
  test(`${label} against a plain server: ECONNECTION saying it speaks plain text, not ETIMEDOUT`, async () => {
    const err = await make().acquire('k', 1000).catch((e) => e)
    assert.equal(err.code, 'ECONNECTION', err.message)
    assert.match(err.message, /TLS was asked for .* speaks plain text/)
  })
}

test('redis:// against a TLS server: ECONNECTION saying it speaks TLS', async () => {
  const err = await new DistributedLock(`redis://127.0.0.1:${secured.port}`).acquire('k', 1000).catch((e) => e)
  assert.equal(err.code, 'ECONNECTION')
  assert.match(err.message, /speaks TLS but the connection was plain text/)
})

test('TLS where the server speaks it still works, and plain text where it does not', async () => {
  const overTls = new DistributedLock({ url: `rediss://127.0.0.1:${secured.port}`, tls: { ca: certs.ca } })
  await (await overTls.acquire('tls:ok', 1000)).release()
  await (await new DistributedLock(plain.url).acquire('plain:ok', 1000)).release()
})
