'use strict'

// Security: TLS (rediss://, a private CA, client certificates, plain text refused), Redis ACL
// users (the minimal command set, keys outside the user's patterns, wrong passwords), and
// secrets that must never surface: passwords and key material in errors and log lines, and
// another holder's token in any return value or error. The TLS servers here speak TLS only
// (`--port 0`), with certificates made for this run by the openssl CLI.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { startRedis } = require('./helpers/redis-server')
const { makeCerts, startTlsRedis } = require('./helpers/tls-certs')
const { DistributedLock, ExclusiveLock, LockHandle, LockError, LockAcquisitionError } = require('..')
const DistributedLockService = require('../maestro')
const { ownerKey } = require('./helpers/keys')

const USER = 'locker'
const PASSWORD = 'acl-Pa55-w0rd-7f3e'
const WRONG = 'not-the-pa55-9c1d'
// Key patterns of the ACL user: the lock keys and their same-slot companions
// ({lock:<key>}\xfffence, {exclusive-lock:<name>}\xffowner and \xfffence).
const ACL_KEYS = ['~lock:*', '~{lock:*', '~exclusive-lock:*', '~{exclusive-lock:*']
// The least the library needs (found by removing one command at a time): EVALSHA and SCRIPT
// LOAD for the scripts, and the commands the scripts run; EXISTS for isLocked; MULTI/EXEC for
// ExclusiveLock.inspect(); HSET/HGET for fencedSet(); SELECT only for a database other than 0.
// PEXPIRETIME is optional (the scripts fall back to PTTL when it is refused) but preferred.
const ACL_COMMANDS = [
  'evalsha', 'script|load', 'exists', 'get', 'set', 'del', 'pexpire', 'pexpireat', 'pexpiretime',
  'pttl', 'incr', 'incrby', 'hset', 'hget', 'time', 'multi', 'exec', 'select',
]
// Fast failure for the calls that are meant to fail.
const QUICK = { connectTimeoutMs: 1000, commandTimeoutMs: 2000 }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let certs
let tlsServer // TLS only, no client certificates
let mtlsServer // TLS only, client certificate required
let plainServer // plain text only
let tlsAdmin // ioredis over TLS to tlsServer, as the default (admin) user
let mtlsAdmin
let plainAdmin
const clients = new Set() // ioredis clients we made, disconnected in after()
const exclusives = new Set() // ExclusiveLocks we made, released in after()

function ioredis(options) {
  const client = new Redis({ lazyConnect: true, maxRetriesPerRequest: 1, ...options })
  client.on('error', () => {})
  clients.add(client)
  return client
}

function exclusive(opts) {
  const lock = new ExclusiveLock(opts)
  lock.on('error', () => {})
  exclusives.add(lock)
  return lock
}

/** `{ value }`, `{ error }` or `{ hung: true }` after `ms`. */
async function settle(promise, ms = 8000) {
  let timer
  const outcome = await Promise.race([
    promise.then(
      (value) => ({ value }),
      (error) => ({ error }),
    ),
    new Promise((resolve) => {
      timer = setTimeout(() => resolve({ hung: true }), ms)
    }),
  ])
  clearTimeout(timer)
  return outcome
}

/** Every place an error could show a secret: message, stack, own enumerable fields, inspect. */
function exposure(err) {
  const fields = {}
  for (const [name, value] of Object.entries(err)) fields[name] = typeof value === 'object' ? util.inspect(value, { depth: 5 }) : String(value)
  return {
    message: String(err.message),
    stack: String(err.stack),
    fields: JSON.stringify(fields),
    inspect: util.inspect(err, { depth: 5 }),
    cause: err.cause === undefined ? '' : util.inspect(err.cause, { depth: 5 }),
  }
}

function assertConceals(err, secrets, label) {
  for (const [where, text] of Object.entries(exposure(err))) {
    for (const secret of secrets) {
      assert.ok(!text.includes(secret), `${label}: the error's ${where} reveals a secret (${secret.slice(0, 12)}...): ${text}`)
    }
  }
}

/** Secret-looking pieces of PEM text: every base64 body line long enough to be unique. */
function pemLines(...pems) {
  return pems.flatMap((pem) => pem.split('\n').filter((line) => line.length >= 40 && !line.startsWith('-----')))
}

/** Acquire, check the key in Redis through `admin`, extend, isLocked, release. */
async function roundTrip(lock, key, admin) {
  const handle = await lock.acquire(key, 10_000)
  assert.ok(handle instanceof LockHandle)
  try {
    assert.equal(await admin.get(`lock:${key}`), handle.token)
    assert.equal(await lock.isLocked(key), true)
    await handle.extend(5_000)
    const pttl = await admin.pttl(`lock:${key}`)
    assert.ok(pttl > 10_000, `PTTL ${pttl} after extend`)
    assert.equal(await lock.tryAcquire(key), null)
  } finally {
    await handle.release()
  }
  assert.equal(await admin.exists(`lock:${key}`), 0)
  assert.equal(await lock.isLocked(key), false)
}

/** An ExclusiveLock acquires, is seen by inspect(), refreshes, releases. */
async function exclusiveRoundTrip(cacheConnection, name, admin) {
  const lock = exclusive({ name, cache_connection: cacheConnection, lock_ttl_ms: 1000, lock_refresh_ms: 300, lock_contents: 'mine' })
  let lost
  lock.on('error', (err) => (lost = err))
  let refreshed = 0
  lock.on('refreshed', () => refreshed++)
  assert.equal(await lock.acquire(), true)
  assert.equal(await admin.get(`exclusive-lock:${name}`), 'mine')
  const seen = await lock.inspect()
  assert.equal(seen.lock_contents, 'mine')
  assert.ok(seen.lock_ttl_ms > 0 && seen.lock_ttl_ms <= 1000, `ttl ${seen.lock_ttl_ms}`)
  await sleep(800)
  assert.equal(lost, undefined, `lost: ${lost?.message}`)
  assert.ok(refreshed >= 1, `refreshed ${refreshed} times`)
  await lock.release()
  assert.equal(await admin.exists(`exclusive-lock:${name}`), 0)
}

async function setAclUser(admin) {
  await admin.acl('SETUSER', USER, 'reset', 'on', `>${PASSWORD}`, ...ACL_KEYS, '-@all', ...ACL_COMMANDS.map((c) => `+${c}`))
}

before(async () => {
  certs = makeCerts()
  ;[tlsServer, mtlsServer, plainServer] = await Promise.all([
    startTlsRedis({ certs }),
    startTlsRedis({ certs, authClients: true }),
    startRedis(),
  ])
  tlsAdmin = ioredis({ host: '127.0.0.1', port: tlsServer.port, tls: tlsServer.clientTls })
  mtlsAdmin = ioredis({ host: '127.0.0.1', port: mtlsServer.port, tls: mtlsServer.clientTls })
  plainAdmin = ioredis({ host: '127.0.0.1', port: plainServer.port })
  await Promise.all([tlsAdmin.connect(), mtlsAdmin.connect(), plainAdmin.connect()])
  await setAclUser(tlsAdmin)
  await setAclUser(plainAdmin)
})

after(async () => {
  for (const lock of exclusives) await lock.release().catch(() => {})
  for (const client of clients) client.disconnect()
  await Promise.all([tlsServer, mtlsServer, plainServer].map((server) => server?.close()))
  certs?.cleanup()
})

describe('TLS', () => {
  test('a rediss:// URL with { tls: { ca } }: DistributedLock acquires, extends, releases', async () => {
    const lock = new DistributedLock({ url: tlsServer.url, tls: { ca: certs.ca } })
    await roundTrip(lock, 'tls:url', tlsAdmin)
  })

  test('{ host, port, tls } with the CA as a Buffer in an array, and servername = host', async () => {
    const lock = new DistributedLock({
      host: 'localhost',
      port: tlsServer.port,
      tls: { ca: [Buffer.from(certs.otherCa), Buffer.from(certs.ca)], servername: 'localhost' },
    })
    await roundTrip(lock, 'tls:object', tlsAdmin)
  })

  test('an ioredis client with tls: { ca }: DistributedLock and ExclusiveLock work', async () => {
    const user = ioredis({ host: '127.0.0.1', port: tlsServer.port, tls: { ca: certs.ca } })
    await roundTrip(new DistributedLock(user), 'tls:ioredis', tlsAdmin)
    await exclusiveRoundTrip(user, 'tls-ioredis', tlsAdmin)
    assert.equal(user.status, 'wait', 'the user client is never connected by us')
    // ioredis with a rediss:// URL and the CA as an option, as its README shows.
    const urlClient = new Redis(tlsServer.url, { tls: { ca: certs.ca }, lazyConnect: true })
    clients.add(urlClient)
    await exclusiveRoundTrip(urlClient, 'tls-ioredis-url', tlsAdmin)
  })

  test('a node-redis client with socket: { tls: true, ca }: works without being connected', async () => {
    const client = createClient({ url: tlsServer.url, socket: { tls: true, ca: certs.ca } })
    await roundTrip(new DistributedLock(client), 'tls:node-redis', tlsAdmin)
    assert.equal(client.isOpen, false)
  })

  test('a server certificate from an unknown CA is refused with ECONNECTION, quickly, without key material', async () => {
    const inputs = {
      'the wrong CA': { url: tlsServer.url, tls: { ca: certs.otherCa } },
      'the system roots': tlsServer.url,
      'an ioredis client with the wrong CA': ioredis({ host: '127.0.0.1', port: tlsServer.port, tls: { ca: certs.otherCa } }),
    }
    const secrets = pemLines(certs.server.key, certs.client.key, certs.ca, certs.otherCa)
    await Promise.all(
      Object.entries(inputs).map(async ([label, input]) => {
        const lock = new DistributedLock(input, QUICK)
        for (const [call, run] of [['acquire', () => lock.acquire('tls:wrong-ca')], ['isLocked', () => lock.isLocked('tls:wrong-ca')]]) {
          const started = performance.now()
          const r = await settle(run())
          assert.ok(!r.hung, `${label} ${call} hung`)
          assert.ok(r.error instanceof LockError, `${label} ${call}: ${r.error?.message ?? 'resolved'}`)
          assert.equal(r.error.code, 'ECONNECTION', `${label} ${call}: ${r.error.code} ${r.error.message}`)
          assert.match(r.error.message, /certificate|UnknownIssuer/i)
          assert.ok(performance.now() - started < 6000, `${label} ${call} took ${performance.now() - started} ms`)
          assertConceals(r.error, secrets, `${label} ${call}`)
        }
      }),
    )
    assert.equal(await tlsAdmin.exists('lock:tls:wrong-ca'), 0)
  })

  test('rejectUnauthorized: false connects to a server the CA does not vouch for', async () => {
    const lock = new DistributedLock({ url: tlsServer.url, tls: { ca: certs.otherCa, rejectUnauthorized: false } })
    await roundTrip(lock, 'tls:insecure', tlsAdmin)
  })

  test('client certificates: required by the server, accepted from our CA, refused otherwise', async () => {
    const { client, otherClient } = certs
    const good = { url: mtlsServer.url, tls: { ca: certs.ca, cert: client.cert, key: client.key } }
    await roundTrip(new DistributedLock(good), 'mtls:object', mtlsAdmin)
    const user = ioredis({ host: '127.0.0.1', port: mtlsServer.port, tls: { ca: certs.ca, cert: Buffer.from(client.cert), key: Buffer.from(client.key) } })
    await roundTrip(new DistributedLock(user), 'mtls:ioredis', mtlsAdmin)
    await exclusiveRoundTrip(user, 'mtls-ioredis', mtlsAdmin)
    const nodeRedis = createClient({ socket: { host: '127.0.0.1', port: mtlsServer.port, tls: true, ca: certs.ca, cert: client.cert, key: client.key } })
    await roundTrip(new DistributedLock(nodeRedis), 'mtls:node-redis', mtlsAdmin)

    const secrets = pemLines(client.key, otherClient.key, certs.server.key)
    const refused = {
      'no client certificate': { url: mtlsServer.url, tls: { ca: certs.ca } },
      'a certificate from another CA': { url: mtlsServer.url, tls: { ca: certs.ca, cert: otherClient.cert, key: otherClient.key } },
    }
    await Promise.all(
      Object.entries(refused).map(async ([label, input]) => {
        const r = await settle(new DistributedLock(input, QUICK).acquire('mtls:refused'))
        assert.ok(!r.hung, `${label} hung`)
        assert.ok(r.error instanceof LockError, `${label}: ${r.error?.message ?? 'resolved'}`)
        assert.equal(r.error.code, 'ECONNECTION', `${label}: ${r.error.message}`)
        assertConceals(r.error, secrets, label)
      }),
    )
    assert.equal(await mtlsAdmin.exists('lock:mtls:refused'), 0)
  })

  test('asked-for TLS against a plain-text port never falls back: every call fails, nothing is written', async () => {
    const port = plainServer.port
    const inputs = {
      'a rediss:// URL': `rediss://127.0.0.1:${port}`,
      'tls: true': { host: '127.0.0.1', port, tls: true },
      'a redis:// URL with tls: { ca }': { url: `redis://127.0.0.1:${port}`, tls: { ca: certs.ca } },
      'rejectUnauthorized: false': { host: '127.0.0.1', port, tls: { rejectUnauthorized: false } },
      'an ioredis client with tls': ioredis({ host: '127.0.0.1', port, tls: { ca: certs.ca } }),
      'a node-redis rediss:// client': createClient({ url: `rediss://127.0.0.1:${port}` }),
      'a node-redis socket.tls client': createClient({ socket: { host: '127.0.0.1', port, tls: true, ca: certs.ca } }),
    }
    await Promise.all(
      Object.entries(inputs).map(async ([label, input]) => {
        const lock = new DistributedLock(input, { connectTimeoutMs: 500, commandTimeoutMs: 1000 })
        for (const [call, run] of [['acquire', () => lock.acquire('plain:refused')], ['tryAcquire', () => lock.tryAcquire('plain:refused')], ['isLocked', () => lock.isLocked('plain:refused')]]) {
          const r = await settle(run())
          assert.ok(!r.hung, `${label} ${call} hung`)
          assert.ok(!('value' in r), `${label} ${call} succeeded over plain text: ${util.inspect(r.value)}`)
          assert.ok(r.error instanceof LockError, `${label} ${call}: ${r.error?.message}`)
          assert.ok(['ECONNECTION', 'ETIMEDOUT'].includes(r.error.code), `${label} ${call}: ${r.error.code} ${r.error.message}`)
        }
      }),
    )
    const svc = new DistributedLockService('lock:plain:svc', 3000, `rediss://127.0.0.1:${port}`)
    assert.equal(await svc.acquire(3000, 300), false)
    assert.deepEqual(await plainAdmin.keys('*lock*'), [])
  })

  test('tls: false cannot turn a rediss:// URL or TLS options into plain text; no TLS over a Unix socket', () => {
    const cases = [
      [{ url: `rediss://127.0.0.1:${plainServer.port}`, tls: false }, 'tls'],
      [{ host: '127.0.0.1', port: plainServer.port, tls: { ca: certs.ca }, url: `rediss://127.0.0.1:${plainServer.port}` }, null],
      [{ path: '/tmp/nrl-none.sock', tls: true }, 'tls'],
      [{ url: 'rediss://127.0.0.1:6379', path: '/tmp/nrl-none.sock' }, 'tls'],
    ]
    for (const [input, argument] of cases) {
      if (argument === null) {
        assert.doesNotThrow(() => new DistributedLock(input))
        continue
      }
      assert.throws(() => new DistributedLock(input), (err) => {
        assert.ok(err instanceof TypeError, err.message)
        assert.equal(err.code, 'EINVAL')
        assert.equal(err.argument, argument)
        return true
      }, util.inspect(input))
    }
  })

  test('bad TLS options are refused at construction, by name, without echoing the value', () => {
    const { client, otherClient } = certs
    const SECRET = 'SECRET-PEM-BODY-123'
    const bad = [
      [null, 'redis.tls', TypeError],
      ['yes', 'redis.tls', TypeError],
      [{ ca: 42 }, 'redis.tls.ca', TypeError],
      [{ ca: [] }, 'redis.tls.ca', TypeError],
      [{ ca: `not a certificate ${SECRET}` }, 'tls.ca', TypeError],
      [{ cert: client.cert }, 'tls.key', TypeError],
      [{ key: client.key }, 'tls.cert', TypeError],
      [{ cert: client.cert, key: `-----BEGIN PRIVATE KEY-----\n${SECRET}\n-----END PRIVATE KEY-----\n` }, 'tls.key', TypeError],
      [{ cert: client.cert, key: otherClient.key }, 'tls.key', TypeError],
      [{ cert: client.cert, key: [client.key, client.key] }, 'redis.tls.key', TypeError],
      [{ cert: client.cert, key: [{ pem: client.key, passphrase: SECRET }] }, 'redis.tls.key.passphrase', TypeError],
      [{ pfx: Buffer.from(SECRET) }, 'redis.tls.pfx', TypeError],
      [{ passphrase: SECRET }, 'redis.tls.passphrase', TypeError],
      [{ checkServerIdentity: () => undefined }, 'redis.tls.checkServerIdentity', TypeError],
      [{ ciphers: 'ALL' }, 'redis.tls.ciphers', TypeError],
      [{ minVersion: 'TLSv1.3' }, 'redis.tls.minVersion', TypeError],
      [{ servername: 'redis.example.com' }, 'tls.servername', TypeError],
      [{ servername: 42 }, 'redis.tls.servername', TypeError],
      [{ rejectUnauthorized: 'no' }, 'redis.tls.rejectUnauthorized', TypeError],
    ]
    const secrets = [SECRET, ...pemLines(client.key, otherClient.key)]
    for (const [tls, argument, Class] of bad) {
      const label = util.inspect(tls, { depth: 0 }).slice(0, 60)
      assert.throws(() => new DistributedLock({ host: '127.0.0.1', port: tlsServer.port, tls }), (err) => {
        assert.ok(err instanceof Class, `${label}: ${err.name} ${err.message}`)
        assert.equal(err.code, 'EINVAL', label)
        assert.equal(err.argument, argument, `${label}: ${err.message}`)
        assert.ok(err.message.includes(argument.replace(/^redis\./, '')), `${label}: ${err.message}`)
        assertConceals(err, secrets, label)
        return true
      })
    }
    assert.throws(() => new DistributedLock(ioredis({ port: tlsServer.port, tls: { ca: 42 } })), { code: 'EINVAL', argument: 'tls.ca' })
    // Accepted: the TLS versions we use anyway, and options that change nothing we do.
    for (const tls of [{ ca: certs.ca, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.3' }, { ca: certs.ca, servername: '127.0.0.1', rejectUnauthorized: true }]) {
      assert.ok(new DistributedLock({ host: '127.0.0.1', port: tlsServer.port, tls }))
    }
  })

  test('an ACL user over TLS: rediss://user:pass@host with the CA', async () => {
    const url = `rediss://${USER}:${PASSWORD}@127.0.0.1:${tlsServer.port}`
    await roundTrip(new DistributedLock({ url, tls: { ca: certs.ca } }), 'tls:acl', tlsAdmin)
    const r = await settle(new DistributedLock({ url: `rediss://${USER}:${WRONG}@127.0.0.1:${tlsServer.port}`, tls: { ca: certs.ca } }, QUICK).acquire('tls:acl'))
    assert.equal(r.error?.code, 'EAUTH', r.error?.message)
    assertConceals(r.error, [PASSWORD, WRONG], 'wrong password over TLS')
  })
})

describe('ACL users', () => {
  const url = () => `redis://${USER}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${plainServer.port}`
  const options = () => ({ host: '127.0.0.1', port: plainServer.port, username: USER, password: PASSWORD })

  test('a URL with user and password: acquire, extend, isLocked, tryAcquire, waitForLock, release', async () => {
    const lock = new DistributedLock(url())
    await roundTrip(lock, 'acl:url', plainAdmin)
    const handle = await lock.waitForLock('acl:url', 1000, 5000)
    assert.ok(await lock.fencedSet('lock:acl:resource', 'v1', handle.fence))
    await handle.release()
    const auto = await lock.acquire('acl:auto', 600, { autoRefresh: true })
    await sleep(900)
    assert.equal(auto.isHeld, true, 'the watchdog refreshes as the ACL user')
    await auto.release()
  })

  test('{ host, port, username, password }, an ioredis client and a node-redis client with a username', async () => {
    await roundTrip(new DistributedLock(options()), 'acl:object', plainAdmin)
    const user = ioredis({ host: '127.0.0.1', port: plainServer.port, username: USER, password: PASSWORD })
    await roundTrip(new DistributedLock(user), 'acl:ioredis', plainAdmin)
    const nodeRedis = createClient({ socket: { host: '127.0.0.1', port: plainServer.port }, username: USER, password: PASSWORD })
    await roundTrip(new DistributedLock(nodeRedis), 'acl:node-redis', plainAdmin)
    const db2 = ioredis({ host: '127.0.0.1', port: plainServer.port, db: 2 })
    await db2.connect()
    await roundTrip(new DistributedLock({ ...options(), db: 2 }), 'acl:db2', db2)
  })

  test('an ExclusiveLock held by the ACL user: acquire, refresh, inspect, release', async () => {
    await exclusiveRoundTrip(url(), 'acl-exclusive', plainAdmin)
    await exclusiveRoundTrip(ioredis({ host: '127.0.0.1', port: plainServer.port, username: USER, password: PASSWORD }), 'acl-exclusive-ioredis', plainAdmin)
  })

  test('an ACL user without PEXPIRETIME: ExclusiveLock acquires and releases again and again (by the script)', async () => {
    const user = 'locker-no-pexpiretime'
    const commands = ACL_COMMANDS.filter((c) => c !== 'pexpiretime').map((c) => `+${c}`)
    await plainAdmin.acl('SETUSER', user, 'reset', 'on', `>${PASSWORD}`, ...ACL_KEYS, '-@all', ...commands)
    const lock = exclusive({ name: 'acl-no-pexpiretime', cache_connection: `redis://${user}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${plainServer.port}` })
    // Enough rounds for the JS-thread connection to open and carry the later ones.
    for (let i = 0; i < 30; i++) {
      assert.equal(await lock.acquire(), true, `round ${i}`)
      assert.equal(await plainAdmin.get('exclusive-lock:acl-no-pexpiretime'), '1')
      const [lockAt, ownerAt] = await Promise.all([
        plainAdmin.pexpiretime('exclusive-lock:acl-no-pexpiretime'),
        plainAdmin.pexpiretime(ownerKey('exclusive-lock:acl-no-pexpiretime')),
      ])
      assert.equal(ownerAt, lockAt, `round ${i}: one expiry for both keys`)
      await lock.release()
      assert.equal(await plainAdmin.exists('exclusive-lock:acl-no-pexpiretime'), 0, `round ${i}`)
      assert.equal(await plainAdmin.exists(ownerKey('exclusive-lock:acl-no-pexpiretime')), 0, `round ${i}`)
    }
  })

  test('an ACL user without MULTI: ExclusiveLock and DistributedLock acquire and release again and again, leaving nothing', async () => {
    const user = 'locker-no-multi'
    const commands = ACL_COMMANDS.filter((c) => c !== 'multi' && c !== 'exec').map((c) => `+${c}`)
    await plainAdmin.acl('SETUSER', user, 'reset', 'on', `>${PASSWORD}`, ...ACL_KEYS, '-@all', ...commands)
    const url = `redis://${user}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${plainServer.port}`
    const lock = exclusive({ name: 'acl-no-multi', cache_connection: url })
    const key = 'exclusive-lock:acl-no-multi'
    const distributed = new DistributedLock(url)
    for (let i = 0; i < 30; i++) {
      assert.equal(await lock.acquire(), true, `round ${i}`)
      assert.equal(await plainAdmin.get(key), '1')
      assert.equal(await plainAdmin.pexpiretime(ownerKey(key)), await plainAdmin.pexpiretime(key), `round ${i}`)
      await lock.release()
      assert.equal(await plainAdmin.exists(key), 0, `round ${i}`)
      assert.equal(await plainAdmin.exists(ownerKey(key)), 0, `round ${i}`)
      const handle = await distributed.acquire('acl-no-multi', 5000)
      assert.equal(await plainAdmin.get('lock:acl-no-multi'), handle.token)
      await handle.release()
      assert.equal(await plainAdmin.exists('lock:acl-no-multi'), 0, `round ${i}`)
    }
  })

  test('a key outside the user\'s patterns is refused with ENOPERM (an ACL denial, not a credentials error), and nothing is written', async () => {
    const lock = new DistributedLock(url(), { keyPrefix: 'other:' })
    for (const [call, run] of [['acquire', () => lock.acquire('x')], ['tryAcquire', () => lock.tryAcquire('x')], ['isLocked', () => lock.isLocked('x')]]) {
      const r = await settle(run())
      assert.ok(r.error instanceof LockError, `${call}: ${r.error?.message ?? 'resolved'}`)
      assert.equal(r.error.code, 'ENOPERM', `${call}: ${r.error.message}`)
      assert.match(r.error.message, /denied this user/)
      assert.doesNotMatch(r.error.message, /credentials/)
      assert.match(r.error.message, /NOPERM|no permissions|can't run/i)
      assertConceals(r.error, [PASSWORD], call)
    }
    const outside = exclusive({ name: 'x', key_prefix: 'other', cache_connection: url() })
    const r = await settle(outside.acquire())
    assert.equal(r.error?.code, 'ENOPERM', r.error?.message)
    assert.equal(outside.acquired, false)
    assert.deepEqual(await plainAdmin.keys('*other*'), [])
    // The same user still works on its own keys afterwards.
    await roundTrip(new DistributedLock(url()), 'acl:after-noperm', plainAdmin)
  })

  test('a wrong password or unknown user: EAUTH, and no password anywhere in the error', async () => {
    const port = plainServer.port
    const inputs = {
      'a URL': `redis://${USER}:${WRONG}@127.0.0.1:${port}`,
      '{ username, password }': { host: '127.0.0.1', port, username: USER, password: WRONG },
      'an ioredis client': ioredis({ host: '127.0.0.1', port, username: USER, password: WRONG }),
      'a node-redis client': createClient({ url: `redis://127.0.0.1:${port}`, username: USER, password: WRONG }),
      'an unknown user with the right password': { host: '127.0.0.1', port, username: 'nobody', password: PASSWORD },
    }
    await Promise.all(
      Object.entries(inputs).map(async ([label, input]) => {
        const lock = new DistributedLock(input, QUICK)
        for (const [call, run] of [['acquire', () => lock.acquire('acl:bad')], ['isLocked', () => lock.isLocked('acl:bad')], ['waitForLock', () => lock.waitForLock('acl:bad', 2000)]]) {
          const r = await settle(run())
          assert.ok(!r.hung, `${label} ${call} hung`)
          assert.ok(r.error instanceof LockError, `${label} ${call}: ${r.error?.message ?? 'resolved'}`)
          assert.equal(r.error.code, 'EAUTH', `${label} ${call}: ${r.error.message}`)
          assertConceals(r.error, [PASSWORD, WRONG, encodeURIComponent(WRONG)], `${label} ${call}`)
        }
      }),
    )
    const ex = exclusive({ name: 'bad', cache_connection: `redis://${USER}:${WRONG}@127.0.0.1:${port}` })
    const r = await settle(ex.acquire())
    assert.equal(r.error?.code, 'EAUTH')
    assertConceals(r.error, [PASSWORD, WRONG], 'ExclusiveLock')
    assert.equal(await plainAdmin.exists('lock:acl:bad'), 0)
  })

  test('loggers never see a password: ExclusiveLock and DistributedLockService', async () => {
    const lines = []
    const log = { isLevelEnabled: () => true }
    for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal']) {
      log[level] = (...args) => lines.push(`${level} ${util.inspect(args, { depth: 8, showHidden: true })}`)
    }
    const port = plainServer.port
    // Wrong password: acquire and inspect fail (inspect logs its error).
    const bad = exclusive({ name: 'logged', cache_connection: `redis://${USER}:${WRONG}@127.0.0.1:${port}`, log })
    await assert.rejects(bad.acquire(), { code: 'EAUTH' })
    await assert.rejects(bad.inspect(), { code: 'EAUTH' })
    // Right password: acquire, refresh (trace), inspect, then lose the lock (error logged).
    const good = exclusive({ name: 'logged', cache_connection: url(), log, lock_ttl_ms: 1000, lock_refresh_ms: 300 })
    const lost = new Promise((resolve) => good.once('error', resolve))
    assert.equal(await good.acquire(), true)
    await good.inspect()
    await sleep(400)
    await plainAdmin.set('exclusive-lock:logged', 'someone else', 'PX', 5000)
    await settle(lost, 3000)
    await plainAdmin.del('exclusive-lock:logged')
    await good.release()
    // DistributedLockService logs its failures with the error object.
    const service = new DistributedLockService('lock:logged-svc', 3000, `redis://${USER}:${WRONG}@127.0.0.1:${port}`, { logger: log })
    assert.equal(await service.acquire(3000, 200), false)
    await service.release()
    assert.ok(lines.some((line) => line.startsWith('error')), `no error was logged: ${lines.join('\n')}`)
    assert.ok(lines.some((line) => line.includes('EAUTH')), 'the auth failure was logged')
    for (const line of lines) {
      for (const secret of [PASSWORD, WRONG]) assert.ok(!line.includes(secret), `a log line reveals a password: ${line}`)
    }
  })
})

describe('another holder\'s token is never returned', () => {
  const url = () => plainServer.url

  test('ExclusiveLock.inspect() gives only { lock_ttl_ms, lock_contents }; a loser learns nothing more', async () => {
    const holder = exclusive({ name: 'tokens', cache_connection: url(), lock_contents: 'holder-contents' })
    assert.equal(await holder.acquire(), true)
    // Written by the acquire when it went as the script (a fresh socket's first attempt), else
    // by the first refresh, 1 s on (ops/exclusive.rs).
    let token
    for (let waited = 0; !token && waited < 2500; waited += 20) {
      token = await plainAdmin.get(ownerKey('exclusive-lock:tokens'))
      if (!token) await sleep(20)
    }
    assert.ok(token && token.length >= 16, `owner token ${token}`)
    const other = exclusive({ name: 'tokens', cache_connection: url() })
    for (const lock of [other, holder]) {
      const seen = await lock.inspect()
      assert.deepEqual(Object.keys(seen).sort(), ['lock_contents', 'lock_ttl_ms'])
      assert.equal(seen.lock_contents, 'holder-contents')
      assert.equal(typeof seen.lock_ttl_ms, 'number')
      assert.ok(!util.inspect(seen, { showHidden: true }).includes(token))
    }
    assert.equal(await other.acquire(), false)
    assert.equal(other.fence, null)
    assert.ok(!util.inspect(other, { depth: 3, showHidden: true }).includes(token))
    await holder.release()
  })

  test('DistributedLock: isLocked is a boolean, and errors about a held key do not carry its token', async () => {
    const key = 'tokens:held'
    const holder = new DistributedLock(url())
    const handle = await holder.acquire(key, 10_000)
    const token = await plainAdmin.get(`lock:${key}`)
    assert.equal(token, handle.token)
    const other = new DistributedLock(url(), { maxRetries: 1, retryDelayMs: 10 })
    const held = await other.isLocked(key)
    assert.equal(held, true)
    assert.equal(typeof held, 'boolean')
    assert.equal(await other.tryAcquire(key), null)
    const failures = {
      acquire: () => other.acquire(key, 1000),
      waitForLock: () => other.waitForLock(key, 100, 1000),
      using: () => other.using(key, () => assert.fail('must not run'), { timeoutMs: 50 }),
    }
    for (const [call, run] of Object.entries(failures)) {
      const r = await settle(run())
      assert.ok(r.error instanceof LockAcquisitionError, `${call}: ${r.error?.message ?? 'resolved'}`)
      assert.equal(r.error.code, 'ELOCKED')
      assert.equal(r.error.key, key)
      assertConceals(r.error, [token], call)
    }
    await handle.release()
  })

  test('a lost lock\'s error does not carry the token of whoever took it', async () => {
    const lock = new DistributedLock(url())
    const handle = await lock.acquire('tokens:lost', 900, { autoRefresh: true })
    const stranger = 'stranger-token-5d1f0e2a'
    await plainAdmin.set('lock:tokens:lost', stranger, 'PX', 10_000)
    const r = await settle(handle.lost, 3000)
    assert.ok(r.value instanceof LockError, 'the loss was reported')
    assertConceals(r.value, [stranger], 'LockLostError')
    await plainAdmin.del('lock:tokens:lost')

    const ex = exclusive({ name: 'tokens-lost', cache_connection: url(), lock_ttl_ms: 1000, lock_refresh_ms: 300 })
    const lost = new Promise((resolve) => ex.once('error', resolve))
    assert.equal(await ex.acquire(), true)
    // Taken by a stranger: the lock key re-created (with an expiry of its own), its owner key
    // theirs.
    await plainAdmin.set('exclusive-lock:tokens-lost', '1', 'PX', 10_000)
    await plainAdmin.set(ownerKey('exclusive-lock:tokens-lost'), stranger, 'PX', 10_000)
    const err = (await settle(lost, 3000)).value
    assert.ok(err instanceof LockError, 'the loss was reported')
    assertConceals(err, [stranger], 'ExclusiveLock error')
  })

  test('DistributedLockService: a waiter\'s status does not show the holder\'s value', async () => {
    const holder = new DistributedLockService('lock:tokens-svc', 5000, url())
    assert.equal(await holder.acquire(5000, 100), true)
    const value = await plainAdmin.get('lock:tokens-svc')
    const waiter = new DistributedLockService('lock:tokens-svc', 5000, url())
    assert.equal(await waiter.acquire(5000, 200), false)
    assert.ok(!JSON.stringify(waiter.getStatus()).includes(value))
    await holder.release()
  })
})
