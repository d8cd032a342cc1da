'use strict'

// Connection inputs: ioredis and node-redis clients (only their settings are read), URLs and
// option objects, password-protected servers.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { startRedis } = require('./helpers/redis-server')
const { startHttpLike } = require('./helpers/not-redis')
const { DistributedLock, LockHandle, LockError } = require('..')

const PASSWORD = 's3cret-pw'
const WRONG = 'wr0ng-pass-xyz'

let server // no password
let pwServer // requirepass PASSWORD
let authServer // requirepass PASSWORD at first; one test changes it
const probes = new Map() // db -> ioredis client on `server`
const opened = [] // every other ioredis client we open, closed in after()
const nodeClients = [] // node-redis clients we connected

/** Our own ioredis client on `server`, database `db`, to look at what landed where. */
async function probe(db = 0) {
  if (!probes.has(db)) {
    const client = new Redis({ host: '127.0.0.1', port: server.port, db, lazyConnect: true, maxRetriesPerRequest: 1 })
    probes.set(db, client)
    await client.connect()
  }
  return probes.get(db)
}

/** An ioredis client the "user" owns; closed in after(). */
function userIoredis(options) {
  const client = new Redis({ lazyConnect: true, maxRetriesPerRequest: 1, ...options })
  client.on('error', () => {})
  opened.push(client)
  return client
}

/** Acquires `key`, checks it landed at `redisKey` in `db`, releases, checks it is gone. */
async function roundTrip(lock, key, redisKey, db = 0) {
  const client = await probe(db)
  const handle = await lock.acquire(key, 10000)
  assert.ok(handle instanceof LockHandle)
  try {
    assert.equal(await client.get(redisKey), handle.token, `${redisKey} in db ${db}`)
    const pttl = await client.pttl(redisKey)
    assert.ok(pttl > 9000 && pttl <= 10000, `PTTL ${pttl}`)
    assert.equal(await lock.isLocked(key), true)
    assert.equal(await lock.tryAcquire(key), null)
  } finally {
    await handle.release()
  }
  assert.equal(await client.exists(redisKey), 0)
  assert.equal(await lock.isLocked(key), false)
  return handle
}

/** Asserts that `redisKey` exists in no database 0..15 but `db`. */
async function onlyIn(redisKey, db, token) {
  const where = []
  for (let i = 0; i < 16; i++) {
    if ((await (await probe(i)).exists(redisKey)) === 1) where.push(i)
  }
  assert.deepEqual(where, [db], `${redisKey} found in dbs ${where}`)
  if (token) assert.equal(await (await probe(db)).get(redisKey), token)
}

before(async () => {
  server = await startRedis()
  pwServer = await startRedis({ password: PASSWORD })
  authServer = await startRedis({ password: PASSWORD })
})

after(async () => {
  for (const client of nodeClients) {
    if (client.isOpen) await client.quit().catch(() => {})
  }
  for (const client of [...probes.values(), ...opened]) client.disconnect()
  if (server) await server.close()
  if (pwServer) await pwServer.close()
  if (authServer) await authServer.close()
})

describe('ioredis clients', () => {
  test('plain client: the key is lock:<key> in db 0', async () => {
    const user = userIoredis({ host: '127.0.0.1', port: server.port })
    await user.connect()
    const lock = new DistributedLock(user)
    const key = 'ioredis:plain'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 0, handle.token)
      assert.equal(await user.get(`lock:${key}`), handle.token)
    } finally {
      await handle.release()
    }
    assert.equal(await user.exists(`lock:${key}`), 0)
  })

  test("the client's keyPrefix is kept: the key is app:lock:<key>", async () => {
    const user = userIoredis({ host: '127.0.0.1', port: server.port, keyPrefix: 'app:' })
    await user.connect()
    const lock = new DistributedLock(user)
    const key = 'ioredis:prefix'
    await roundTrip(lock, key, `app:lock:${key}`)
    const handle = await lock.acquire(key, 10000)
    try {
      assert.equal(await (await probe(0)).exists(`lock:${key}`), 0)
      // Through the user's client, the key reads as the original package would have written it.
      assert.equal(await user.get(`lock:${key}`), handle.token)
    } finally {
      await handle.release()
    }
    // And a lock the user's client writes through its prefix is seen as held.
    await user.set(`lock:${key}`, 'held-by-user', 'PX', 10000)
    assert.equal(await (await probe(0)).get(`app:lock:${key}`), 'held-by-user')
    assert.equal(await lock.isLocked(key), true)
    assert.equal(await lock.tryAcquire(key), null)
    await user.del(`lock:${key}`)
    assert.equal(await lock.isLocked(key), false)
  })

  test("the client's keyPrefix and our keyPrefix combine", async () => {
    const user = userIoredis({ host: '127.0.0.1', port: server.port, keyPrefix: 'app:' })
    const lock = new DistributedLock(user, { keyPrefix: 'mine:' })
    await roundTrip(lock, 'ioredis:two-prefixes', 'app:mine:ioredis:two-prefixes')
  })

  test('the client db is used: db 3, nothing in db 0', async () => {
    const user = userIoredis({ host: '127.0.0.1', port: server.port, db: 3 })
    await user.connect()
    const lock = new DistributedLock(user)
    const key = 'ioredis:db3'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 3, handle.token)
      assert.equal(await user.get(`lock:${key}`), handle.token)
      assert.equal(await (await probe(0)).exists(`lock:${key}`), 0)
    } finally {
      await handle.release()
    }
    assert.equal(await (await probe(3)).exists(`lock:${key}`), 0)
  })

  test("the user's client stays connected, usable and unchanged", async () => {
    const user = userIoredis({ host: '127.0.0.1', port: server.port, keyPrefix: 'usr:', db: 2 })
    await user.connect()
    assert.equal(user.status, 'ready')
    const optionsBefore = JSON.stringify(user.options)
    const listenersBefore = user.eventNames().map((name) => [name, user.listenerCount(name)])
    const lock = new DistributedLock(user)
    const handle = await lock.acquire('ioredis:usable', 10000)
    await handle.extend(1000)
    assert.equal(await lock.isLocked('ioredis:usable'), true)
    await handle.release()
    await lock.using('ioredis:usable', async () => {})
    // Give a close or a QUIT a moment to show.
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.equal(user.status, 'ready')
    await user.set('plain', 'value')
    assert.equal(await user.get('plain'), 'value')
    assert.equal(await (await probe(2)).get('usr:plain'), 'value')
    assert.equal(JSON.stringify(user.options), optionsBefore)
    assert.deepEqual(user.eventNames().map((name) => [name, user.listenerCount(name)]), listenersBefore)
    await user.del('plain')
  })

  test('a client that is not connected is not connected by us', async () => {
    const user = userIoredis({ host: '127.0.0.1', port: server.port, keyPrefix: 'lazy:' })
    assert.equal(user.status, 'wait')
    const lock = new DistributedLock(user)
    await roundTrip(lock, 'ioredis:lazy', 'lazy:lock:ioredis:lazy')
    assert.equal(user.status, 'wait')
  })
})

describe('password-protected Redis', () => {
  async function works(lock, key) {
    const handle = await lock.acquire(key, 10000)
    const admin = userIoredis({ host: '127.0.0.1', port: pwServer.port, password: PASSWORD })
    try {
      await admin.connect()
      assert.equal(await admin.get(`lock:${key}`), handle.token)
      assert.equal(await lock.isLocked(key), true)
    } finally {
      await handle.release()
    }
    assert.equal(await admin.exists(`lock:${key}`), 0)
    admin.disconnect()
  }

  test('works through an ioredis client created with the password', async () => {
    const user = userIoredis({ host: '127.0.0.1', port: pwServer.port, password: PASSWORD })
    await user.connect()
    await works(new DistributedLock(user), 'pw:ioredis')
    assert.equal(user.status, 'ready')
  })

  test('works through a URL with the password', async () => {
    assert.ok(pwServer.url.includes(PASSWORD))
    await works(new DistributedLock(pwServer.url), 'pw:url')
  })

  test('works through { host, port, password }', async () => {
    await works(new DistributedLock({ host: '127.0.0.1', port: pwServer.port, password: PASSWORD }), 'pw:object')
  })

  test('works through { url } with a password field', async () => {
    await works(
      new DistributedLock({ url: `redis://127.0.0.1:${pwServer.port}`, password: PASSWORD }),
      'pw:url-and-field',
    )
  })

  // Each way of passing bad credentials, as a fresh lock (a fresh connection) per call.
  const badInputs = {
    'a URL with a wrong password': () => `redis://:${WRONG}@127.0.0.1:${pwServer.port}`,
    '{ host, port, password } with a wrong password': () => ({ host: '127.0.0.1', port: pwServer.port, password: WRONG }),
    'an ioredis client with a wrong password': () =>
      userIoredis({ host: '127.0.0.1', port: pwServer.port, password: WRONG }),
    'no password at all': () => ({ host: '127.0.0.1', port: pwServer.port }),
  }
  const calls = {
    acquire: (lock) => lock.acquire('pw:bad'),
    tryAcquire: (lock) => lock.tryAcquire('pw:bad'),
    waitForLock: (lock) => lock.waitForLock('pw:bad', 500),
    isLocked: (lock) => lock.isLocked('pw:bad'),
    using: (lock) => lock.using('pw:bad', () => assert.fail('fn must not run')),
  }

  /** Runs every call against `input`; each must reject within 6 s. Returns the errors. */
  async function failures(makeInput) {
    const errors = {}
    const lock = new DistributedLock(makeInput())
    for (const [name, call] of Object.entries(calls)) {
      const started = performance.now()
      let timer
      const outcome = await Promise.race([
        call(lock).then(
          () => ({ resolved: true }),
          (error) => ({ error }),
        ),
        new Promise((resolve) => {
          timer = setTimeout(() => resolve({ hung: true }), 6000)
        }),
      ])
      clearTimeout(timer)
      errors[name] = { ...outcome, elapsed: performance.now() - started }
    }
    return errors
  }

  for (const [label, makeInput] of Object.entries(badInputs)) {
    test(`${label}: every call rejects with a LockError, does not hang, reveals no password`, async () => {
      const results = await failures(makeInput)
      for (const [name, r] of Object.entries(results)) {
        assert.ok(!r.hung, `${name} hung`)
        assert.ok(!r.resolved, `${name} resolved`)
        assert.ok(r.error instanceof LockError, `${name}: ${r.error?.name}: ${r.error?.message}`)
        assert.ok(r.elapsed < 6000, `${name} took ${r.elapsed} ms`)
        for (const secret of [WRONG, PASSWORD]) {
          assert.ok(!r.error.message.includes(secret), `${name}: message reveals a password: ${r.error.message}`)
          assert.ok(!String(r.error.stack).includes(secret), `${name}: stack reveals a password`)
          assert.ok(!JSON.stringify({ ...r.error }).includes(secret), `${name}: a field reveals a password`)
        }
      }
      // Nothing was written with bad credentials.
      const admin = userIoredis({ host: '127.0.0.1', port: pwServer.port, password: PASSWORD })
      await admin.connect()
      assert.equal(await admin.exists('lock:pw:bad'), 0)
      admin.disconnect()
    })

    test(`${label}: the error code is EAUTH`, async () => {
      const results = await failures(makeInput)
      const codes = Object.fromEntries(Object.entries(results).map(([name, r]) => [name, r.error?.code]))
      assert.deepEqual(
        codes,
        Object.fromEntries(Object.keys(calls).map((name) => [name, 'EAUTH'])),
        `codes ${JSON.stringify(codes)}; first message: ${results.acquire.error?.message}`,
      )
    })
  }

  test('a rejected password is not remembered: once the server accepts it, the same lock works', async () => {
    const NEXT = 'next-pw-123'
    const lock = new DistributedLock({ host: '127.0.0.1', port: authServer.port, password: NEXT })
    await assert.rejects(lock.isLocked('pw:recover'), (err) => err instanceof LockError)
    const admin = userIoredis({ host: '127.0.0.1', port: authServer.port, password: PASSWORD })
    await admin.connect()
    await admin.config('SET', 'requirepass', NEXT)
    // The next call opens a fresh connection; allow a few tries for the old one to be dropped.
    let last
    const deadline = Date.now() + 3000
    while (Date.now() < deadline) {
      try {
        last = await lock.isLocked('pw:recover')
        break
      } catch (err) {
        last = err
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    assert.equal(last, false, `still failing: ${last?.code} ${last?.message}`)
    const handle = await lock.acquire('pw:recover', 10000)
    assert.equal(await admin.get('lock:pw:recover'), handle.token)
    await handle.release()
  })

  test('a lock with the right password still works after bad ones failed', async () => {
    await works(new DistributedLock(pwServer.url), 'pw:after-bad')
  })
})

describe('node-redis v4 clients', () => {
  test('a client that is not connected: works, uses db 0, stays closed', async () => {
    const client = createClient({ url: server.url })
    assert.equal(client.isOpen, false)
    const lock = new DistributedLock(client)
    const key = 'node-redis:closed'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 0, handle.token)
    } finally {
      await handle.release()
    }
    assert.equal(client.isOpen, false)
  })

  test('a client that is not connected, with database 2: uses db 2', async () => {
    const client = createClient({ url: server.url, database: 2 })
    const lock = new DistributedLock(client)
    const key = 'node-redis:closed-db2'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 2, handle.token)
    } finally {
      await handle.release()
    }
    assert.equal(client.isOpen, false)
  })

  test('a connected client: works, uses its db, stays connected and usable', async () => {
    const client = createClient({ url: server.url })
    client.on('error', () => {})
    nodeClients.push(client)
    await client.connect()
    const lock = new DistributedLock(client)
    const key = 'node-redis:open'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 0, handle.token)
      assert.equal(await client.get(`lock:${key}`), handle.token)
    } finally {
      await handle.release()
    }
    assert.equal(client.isOpen, true)
    assert.equal(client.isReady, true)
    assert.equal(await client.ping(), 'PONG')
    await client.quit()
  })

  test('a connected client with database 2: the lock is in db 2, visible to the client', async () => {
    const client = createClient({ url: server.url, database: 2 })
    client.on('error', () => {})
    nodeClients.push(client)
    await client.connect()
    const lock = new DistributedLock(client)
    const key = 'node-redis:open-db2'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 2, handle.token)
      assert.equal(await client.get(`lock:${key}`), handle.token)
    } finally {
      await handle.release()
    }
    assert.equal(await client.exists(`lock:${key}`), 0)
    assert.equal(client.isOpen, true)
    await client.quit()
  })

  test('a client given a URL with a db path: uses that db', async () => {
    const client = createClient({ url: `${server.url}/6` })
    const lock = new DistributedLock(client)
    const key = 'node-redis:url-db6'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 6, handle.token)
    } finally {
      await handle.release()
    }
  })

  test('a client given socket host/port instead of a URL', async () => {
    const client = createClient({ socket: { host: '127.0.0.1', port: server.port }, database: 7 })
    const lock = new DistributedLock(client)
    const key = 'node-redis:socket'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 7, handle.token)
    } finally {
      await handle.release()
    }
  })

  test('a client with a password reaches a protected server', async () => {
    const client = createClient({ url: `redis://127.0.0.1:${pwServer.port}`, password: PASSWORD })
    const lock = new DistributedLock(client)
    const handle = await lock.acquire('node-redis:pw', 10000)
    const admin = userIoredis({ host: '127.0.0.1', port: pwServer.port, password: PASSWORD })
    try {
      await admin.connect()
      assert.equal(await admin.get('lock:node-redis:pw'), handle.token)
    } finally {
      await handle.release()
      admin.disconnect()
    }
  })
})

describe('URLs and option objects', () => {
  test('a redis://host:port/5 URL uses db 5', async () => {
    const lock = new DistributedLock(`redis://127.0.0.1:${server.port}/5`)
    const key = 'url:db5'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 5, handle.token)
    } finally {
      await handle.release()
    }
    assert.equal(await (await probe(5)).exists(`lock:${key}`), 0)
  })

  test('a redis://host:port URL without a path uses db 0', async () => {
    const lock = new DistributedLock(`redis://127.0.0.1:${server.port}`)
    await roundTrip(lock, 'url:db0', 'lock:url:db0', 0)
  })

  test('a { host, port, db } object works', async () => {
    const lock = new DistributedLock({ host: '127.0.0.1', port: server.port, db: 4 })
    const key = 'object:db4'
    await roundTrip(lock, key, `lock:${key}`, 4)
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 4, handle.token)
    } finally {
      await handle.release()
    }
  })

  test('a { url, db } object: db wins over the URL path', async () => {
    const lock = new DistributedLock({ url: `redis://127.0.0.1:${server.port}/5`, db: 8 })
    const key = 'object:url-and-db'
    const handle = await lock.acquire(key, 10000)
    try {
      await onlyIn(`lock:${key}`, 8, handle.token)
    } finally {
      await handle.release()
    }
  })
})

describe('a server that is not Redis', () => {
  test('is a connection error that says so, not a parse message, and never a lock', async () => {
    const web = await startHttpLike()
    try {
      const lock = new DistributedLock(`redis://127.0.0.1:${web.port}`, { commandTimeoutMs: 2000 })
      for (const [call, run] of [['acquire', () => lock.acquire('x')], ['tryAcquire', () => lock.tryAcquire('x')], ['isLocked', () => lock.isLocked('x')]]) {
        await assert.rejects(run(), (err) => {
          assert.ok(err instanceof LockError, `${call}: ${err}`)
          assert.equal(err.code, 'ECONNECTION', `${call}: ${err.message}`)
          assert.match(err.message, /did not answer in the Redis protocol/)
          assert.doesNotMatch(err.message, /parse|invalid|unexpected/i)
          return true
        })
      }
    } finally {
      await web.close()
    }
  })
})

describe('several instances', () => {
  test('instances built from equal settings exclude each other', async () => {
    const key = 'instances:equal'
    const a = new DistributedLock(server.url)
    const b = new DistributedLock(server.url)
    const c = new DistributedLock({ host: '127.0.0.1', port: server.port })
    const d = new DistributedLock(userIoredis({ host: '127.0.0.1', port: server.port }))
    const e = new DistributedLock(createClient({ url: server.url }))
    const handle = await a.acquire(key, 10000)
    try {
      for (const [name, other] of Object.entries({ b, c, d, e })) {
        assert.equal(await other.tryAcquire(key), null, `${name} got the lock`)
        assert.equal(await other.isLocked(key), true, name)
        await assert.rejects(other.acquire(key), { code: 'ELOCKED' })
      }
    } finally {
      await handle.release()
    }
    const next = await b.acquire(key, 10000)
    assert.equal(await a.tryAcquire(key), null)
    await next.release()
  })

  test('an instance with a different keyPrefix does not collide', async () => {
    const key = 'instances:prefix'
    const a = new DistributedLock(server.url)
    const b = new DistributedLock(server.url)
    const other = new DistributedLock(server.url, { keyPrefix: 'other:' })
    const ha = await a.acquire(key, 10000)
    try {
      assert.equal(await b.tryAcquire(key), null)
      assert.equal(await other.isLocked(key), false)
      const ho = await other.acquire(key, 10000)
      try {
        const client = await probe(0)
        assert.equal(await client.get(`lock:${key}`), ha.token)
        assert.equal(await client.get(`other:${key}`), ho.token)
        assert.notEqual(ha.token, ho.token)
      } finally {
        await ho.release()
      }
      assert.equal(await a.isLocked(key), true, "releasing other's lock must not free ours")
    } finally {
      await ha.release()
    }
  })

  test('instances on different databases do not collide', async () => {
    const key = 'instances:dbs'
    const a = new DistributedLock(`redis://127.0.0.1:${server.port}/0`)
    const b = new DistributedLock(`redis://127.0.0.1:${server.port}/1`)
    const ha = await a.acquire(key, 10000)
    try {
      const hb = await b.tryAcquire(key, 10000)
      assert.ok(hb instanceof LockHandle, 'db 1 lock blocked by db 0 lock')
      await hb.release()
    } finally {
      await ha.release()
    }
  })
})
