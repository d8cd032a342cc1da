'use strict'

// What createRedisBackend takes as `redis` (an ioredis client whose settings are read, a
// node-redis client, a URL, options) and what it refuses, that the user's client is never
// touched, and Redis failures as syncguard's error codes. Private redis-servers only.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { once } = require('node:events')
const { Worker } = require('node:worker_threads')
const { startRedis } = require('./helpers/redis-server')
const { makeCerts, startTlsRedis } = require('./helpers/tls-certs')
const sg = require('../syncguard')

let server
let raw
let n = 0
const fresh = (name) => `${name}-${++n}`

before(async () => {
  server = await startRedis({ password: 'sesame' })
  raw = new Redis({ port: server.port, password: 'sesame', lazyConnect: true })
  await raw.connect()
})

after(async () => {
  raw.disconnect()
  await server.close()
})

/** `fn()` throws syncguard's InvalidArgument, naming `redis`. */
function refusedAsRedis(fn) {
  assert.throws(fn, (err) => {
    assert.ok(err instanceof sg.LockError, `not a syncguard LockError: ${err}`)
    assert.equal(err.code, 'InvalidArgument')
    assert.match(err.message, /\bredis\b/)
    return true
  })
}

test("an ioredis client: its port, db and password are honoured, and the client is never touched", async () => {
  const client = new Redis({ port: server.port, password: 'sesame', db: 3, lazyConnect: true })
  const backend = sg.createRedisBackend(client)
  assert.equal(typeof client.acquireLock, 'undefined', 'no defineCommand on the user\'s client')
  assert.equal(client.status, 'wait', 'not connected by us')
  const key = fresh('ioredis')
  const won = await backend.acquire({ key, ttlMs: 10_000 })
  assert.equal(won.ok, true)
  await raw.select(3)
  assert.equal(JSON.parse(await raw.get(`syncguard:${key}`)).lockId, won.lockId)
  await raw.select(0)
  assert.equal(await raw.exists(`syncguard:${key}`), 0, 'not in db 0')
  client.disconnect()
  assert.deepEqual(await won.release(), { ok: true }, 'our calls go on with the client closed')
})

test('an ioredis keyPrefix prefixes every key, and the index names the key really written', async () => {
  const client = new Redis({ port: server.port, password: 'sesame', keyPrefix: 'tenant:', lazyConnect: true })
  const backend = sg.createRedisBackend(client)
  const key = fresh('prefixed')
  const won = await backend.acquire({ key, ttlMs: 10_000 })
  assert.ok(await raw.get(`tenant:syncguard:${key}`))
  assert.equal(await raw.get(`tenant:syncguard:id:${won.lockId}`), `tenant:syncguard:${key}`)
  assert.equal(await raw.get(`tenant:syncguard:fence:syncguard:${key}`), '1')
  assert.ok(await backend.lookup({ lockId: won.lockId }))
  assert.equal((await backend.extend({ lockId: won.lockId, ttlMs: 20_000 })).ok, true)
  assert.deepEqual(await backend.release({ lockId: won.lockId }), { ok: true })
  assert.equal(await raw.exists(`tenant:syncguard:${key}`), 0)
  client.disconnect()
})

test('a node-redis client, a URL and options name the same server', async () => {
  const key = fresh('forms')
  const nodeRedis = createClient({ url: `redis://:sesame@127.0.0.1:${server.port}` })
  const forms = [
    sg.createRedisBackend(nodeRedis),
    sg.createRedisBackend(`redis://:sesame@127.0.0.1:${server.port}`),
    sg.createRedisBackend({ host: '127.0.0.1', port: server.port, password: 'sesame' }),
  ]
  assert.equal(nodeRedis.isOpen, false, 'the node-redis client is left as it was')
  const won = await forms[0].acquire({ key, ttlMs: 10_000 })
  assert.equal(won.ok, true)
  for (const other of forms.slice(1)) {
    assert.equal(await other.isLocked({ key }), true)
    assert.equal((await other.acquire({ key, ttlMs: 10_000 })).reason, 'locked')
  }
  assert.deepEqual(await forms[2].release({ lockId: won.lockId }), { ok: true })
})

test('what names no server (or has no eval function) is refused at creation with InvalidArgument naming redis; a Cluster with any keyPrefix is read as a cluster', () => {
  // Read as a cluster (syncguard-cluster.test.js runs one), never through its own eval; the
  // default, untagged prefix included.
  const cluster = new Redis.Cluster([{ host: '127.0.0.1', port: server.port }], { lazyConnect: true })
  cluster.eval = () => assert.fail('the Cluster\'s own eval was used')
  for (const options of [undefined, { keyPrefix: 'jobs' }, { keyPrefix: '{jobs}' }]) {
    assert.equal(typeof sg.createRedisBackend(cluster, options).acquire, 'function')
  }
  assert.equal(cluster.status, 'wait', 'the ioredis client was not connected')
  refusedAsRedis(() => sg.createRedisBackend({ eval: 1 }))
  refusedAsRedis(() => sg.createRedisBackend(42))
  refusedAsRedis(() => sg.createRedisBackend(null))
  refusedAsRedis(() => sg.createRedisBackend(''))
  refusedAsRedis(() => sg.createRedisBackend('ftp://example.com'))
  cluster.disconnect()
})

test('a wrong password is AuthFailed; an ACL user denied the scripts is AuthFailed', async () => {
  const wrong = sg.createRedisBackend(`redis://:nope@127.0.0.1:${server.port}`, { commandTimeoutMs: 2000 })
  await assert.rejects(wrong.isLocked({ key: 'k' }), (err) => {
    assert.equal(err.code, 'AuthFailed')
    assert.match(err.message, /^Redis authentication error: /)
    assert.ok(err.context.cause instanceof Error)
    return true
  })
  await raw.call('ACL', 'SETUSER', 'noscripts', 'on', '>pw', '~*', '+@all', '-@scripting')
  const denied = sg.createRedisBackend(`redis://noscripts:pw@127.0.0.1:${server.port}`, { commandTimeoutMs: 2000 })
  await assert.rejects(denied.acquire({ key: 'k', ttlMs: 1000 }), (err) => {
    assert.equal(err.code, 'AuthFailed')
    assert.match(err.message, /^Redis authentication error: /)
    return true
  })
})

test('a paused server: NetworkTimeout within commandTimeoutMs; a stopped one: ServiceUnavailable', async () => {
  const own = await startRedis()
  try {
    const backend = sg.createRedisBackend(own.url, { commandTimeoutMs: 300 })
    assert.equal(await backend.isLocked({ key: 'k' }), false)
    own.pause()
    const started = Date.now()
    await assert.rejects(backend.acquire({ key: 'k', ttlMs: 1000 }), (err) => {
      assert.equal(err.code, 'NetworkTimeout')
      assert.match(err.message, /^Redis timeout: /)
      return true
    })
    assert.ok(Date.now() - started < 2000)
    own.resume()
    // extend, isLocked and lookup are bounded the same way.
    const held = await backend.acquire({ key: 'held', ttlMs: 30_000 })
    assert.equal(held.ok, true)
    own.pause()
    const calls = {
      extend: () => backend.extend({ lockId: held.lockId, ttlMs: 30_000 }),
      isLocked: () => backend.isLocked({ key: 'held' }),
      lookupByKey: () => backend.lookup({ key: 'held' }),
      lookupById: () => backend.lookup({ lockId: held.lockId }),
    }
    for (const [name, call] of Object.entries(calls)) {
      const at = Date.now()
      await assert.rejects(call(), (err) => {
        assert.equal(err.code, 'NetworkTimeout', `${name}: ${err.code}`)
        return true
      })
      assert.ok(Date.now() - at < 2000, `${name} took ${Date.now() - at} ms`)
    }
    own.resume()
    await own.stop()
    const down = sg.createRedisBackend(own.url, { commandTimeoutMs: 500 })
    await assert.rejects(down.isLocked({ key: 'k' }), (err) => {
      assert.ok(['ServiceUnavailable', 'NetworkTimeout'].includes(err.code), err.code)
      assert.match(err.message, /^Redis (connection error|timeout): /)
      return true
    })
  } finally {
    await own.close()
  }
})

test('an object with only an eval function is used through it alone: no connection of ours opens', async () => {
  const own = await startRedis()
  const client = new Redis(own.url)
  try {
    await client.ping()
    const clientsOf = async () => (await client.client('LIST')).trim().split('\n').length
    const before = await clientsOf()
    let evals = 0
    const backend = sg.createRedisBackend({
      eval: (...args) => {
        evals++
        return client.eval(...args)
      },
    })
    const held = await backend.acquire({ key: 'eval-only', ttlMs: 10_000 })
    assert.equal(held.ok, true)
    assert.equal(await backend.isLocked({ key: 'eval-only' }), true)
    assert.equal((await backend.release({ lockId: held.lockId })).ok, true)
    assert.ok(evals >= 3, `${evals} eval calls`)
    assert.equal(await clientsOf(), before, 'a connection was opened besides the user\'s own')
  } finally {
    client.disconnect()
    await own.close()
  }
})

test('commandTimeoutMs that is not a positive number is refused, naming it', () => {
  for (const commandTimeoutMs of [0, -1, NaN, Infinity, '5']) {
    assert.throws(
      () => sg.createRedisBackend('memory://clients', { commandTimeoutMs }),
      (err) => err.code === 'InvalidArgument' && /commandTimeoutMs/.test(err.message),
    )
  }
})

test('disposal against a stalled server: bounded by disposeTimeoutMs; a failed release goes to onReleaseError', async () => {
  const own = await startRedis()
  try {
    const reported = []
    const onReleaseError = (error, context) => reported.push([error, context])
    // The command timeout far past the disposal's bound: a disposal that waited for it would
    // pass the check below by a margin a loaded machine's stalls do not reach.
    const bounded = sg.createRedisBackend(own.url, { disposeTimeoutMs: 150, commandTimeoutMs: 2500, onReleaseError })
    const key = 'stalled'
    const won = await bounded.acquire({ key, ttlMs: 10_000 })
    own.pause()
    const started = Date.now()
    await won[Symbol.asyncDispose]()
    const took = Date.now() - started
    assert.ok(took >= 140 && took < 1500, `disposal took ${took} ms`)
    // The release still in flight fails at its command timeout, and is reported then.
    // Polled, not slept: under load the timeout's report can come later than 2.8 s.
    const deadline = Date.now() + 6000
    while (reported.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    assert.equal(reported.length, 1)
    assert.equal(reported[0][0].code, 'NetworkTimeout')
    assert.deepEqual(reported[0][1], { lockId: won.lockId, key, source: 'disposal' })
    own.resume()
    const failing = sg.createRedisBackend(own.url, { commandTimeoutMs: 200, onReleaseError })
    const again = await failing.acquire({ key: 'stalled-2', ttlMs: 10_000 })
    own.pause()
    await again[Symbol.asyncDispose]()
    assert.equal(reported.length, 2, 'a release error before any timer is reported too')
    assert.equal(reported[1][0].code, 'NetworkTimeout')
    own.resume()
  } finally {
    await own.close()
  }
})

test("an ioredis client's TLS settings and an ACL username are honoured", async () => {
  const certs = makeCerts()
  const tlsServer = await startTlsRedis({ certs })
  const admin = new Redis({ host: '127.0.0.1', port: tlsServer.port, tls: tlsServer.clientTls, lazyConnect: true })
  try {
    await admin.connect()
    await admin.call('ACL', 'SETUSER', 'locker', 'on', '>pw', '~*', '+@all')
    const user = new Redis({ host: '127.0.0.1', port: tlsServer.port, tls: { ca: certs.ca }, username: 'locker', password: 'pw', lazyConnect: true })
    const backend = sg.createRedisBackend(user)
    const won = await backend.acquire({ key: 'tls', ttlMs: 10_000 })
    assert.equal(won.ok, true)
    assert.equal(JSON.parse(await admin.get('syncguard:tls')).lockId, won.lockId)
    assert.deepEqual(await won.release(), { ok: true })
    const untrusted = sg.createRedisBackend({ host: '127.0.0.1', port: tlsServer.port, tls: true }, { commandTimeoutMs: 2000 })
    await assert.rejects(untrusted.isLocked({ key: 'tls' }), (err) => err instanceof sg.LockError && err.code === 'ServiceUnavailable')
    user.disconnect()
  } finally {
    admin.disconnect()
    await tlsServer.close()
    certs.cleanup()
  }
})

test('a lock won for a worker thread terminated meanwhile is freed, not left to its TTL', async () => {
  const own = await startRedis()
  const probe = new Redis(own.url, { lazyConnect: true })
  try {
    await probe.connect()
    const source = `
      const { parentPort, workerData } = require('node:worker_threads')
      const sg = require(${JSON.stringify(require.resolve('../syncguard'))})
      const backend = sg.createRedisBackend(workerData.url)
      ;(async () => {
        await backend.isLocked({ key: 'orphan' })
        parentPort.postMessage('ready')
        parentPort.once('message', () => {
          backend.acquire({ key: 'orphan', ttlMs: 30000 }).catch(() => {})
          parentPort.postMessage('sent')
        })
      })()
    `
    const worker = new Worker(source, { eval: true, workerData: { url: own.url } })
    assert.equal((await once(worker, 'message'))[0], 'ready')
    own.pause()
    worker.postMessage('go')
    assert.equal((await once(worker, 'message'))[0], 'sent')
    await new Promise((resolve) => setTimeout(resolve, 100))
    await worker.terminate()
    own.resume()
    const deadline = Date.now() + 3000
    while ((await probe.get('syncguard:fence:syncguard:orphan')) === null) {
      assert.ok(Date.now() < deadline, 'the attempt never ran')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    while ((await probe.exists('syncguard:orphan')) === 1) {
      assert.ok(Date.now() < deadline, 'the lock won for the terminated worker was kept')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  } finally {
    probe.disconnect()
    await own.close()
  }
})

test('an acquire that timed out but ran later frees the lock it took', async () => {
  const own = await startRedis()
  const probe = new Redis(own.url, { lazyConnect: true })
  try {
    await probe.connect()
    const backend = sg.createRedisBackend(own.url, { commandTimeoutMs: 300 })
    // Warm: the connection open and the scripts loaded, so the attempt below goes as usual.
    for (let i = 0; i < 3; i++) await (await backend.acquire({ key: 'late', ttlMs: 30_000 })).release()
    own.pause()
    await assert.rejects(backend.acquire({ key: 'late', ttlMs: 30_000 }), (err) => err.code === 'NetworkTimeout')
    own.resume()
    const deadline = Date.now() + 3000
    while ((await probe.get('syncguard:fence:syncguard:late')) !== '4') {
      assert.ok(Date.now() < deadline, 'the late attempt never ran')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    while ((await probe.exists('syncguard:late')) === 1) {
      assert.ok(Date.now() < deadline, 'the lock a timed-out attempt took was kept')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    assert.equal((await backend.acquire({ key: 'late', ttlMs: 1000 })).ok, true)
  } finally {
    probe.disconnect()
    await own.close()
  }
})
