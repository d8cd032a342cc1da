'use strict'

// A Sentinel set whose master is announced at an address that accepts nothing any more: the
// sentinel watches the master (password and all) through a forwarder, `announced`, whose port
// is then closed to new connections, the sentinel's own links kept open through it. ioredis's
// `natMap` sends the announced address to a second forwarder, `mapped`: the lookup's ROLE
// check and the locks go through it (it counts the connections; the keys land on the
// master). Without the map, or with a map to a closed port, the same set fails: an error, not
// a hang, and no password in it. Servers are stopped by pid.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const Redis = require('ioredis')
const { RedisServer, freePort } = require('./helpers/redis-server')
const { SentinelServer } = require('./helpers/redis-sentinel')
const { TcpProxy } = require('./helpers/tcp-proxy')
const { refused } = require('./helpers/refused')
const { DistributedLock, ExclusiveLock } = require('..')

const PASSWORD = 'hunter2'
const NAME = 'mymaster'
const OPTIONS = { connectTimeoutMs: 1000, commandTimeoutMs: 2000 }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let master
let announced
let mapped
let sentinel
let watcher
let raw
const clients = []

/** The sentinel's view of the master: its fields (`flags`, `ip`, `port`, ...). */
async function masterSeen(c) {
  const fields = await c.call('SENTINEL', 'MASTER', NAME)
  return Object.fromEntries(fields.flatMap((v, i) => (i % 2 ? [] : [[v, fields[i + 1]]])))
}

before(async () => {
  master = await new RedisServer({ password: PASSWORD }).start()
  announced = await new TcpProxy(master.port).start()
  // Never down in this file: its links stay up, and no failover could happen with one sentinel.
  sentinel = await new SentinelServer(announced.port, { downAfterMs: 60_000, authPass: PASSWORD }).start()
  watcher = new Redis({ port: sentinel.port, host: '127.0.0.1', maxRetriesPerRequest: 1 })
  watcher.on('error', () => {})
  clients.push(watcher)
  // Its command and pub/sub links are open (through `announced`), and it has read INFO.
  const deadline = Date.now() + 20_000
  for (;;) {
    const seen = await masterSeen(watcher).catch(() => ({}))
    if (announced.accepted >= 2 && seen.flags === 'master' && seen['role-reported'] === 'master' && Number(seen['info-refresh']) < 10_000) break
    if (Date.now() > deadline) throw new Error(`the sentinel did not settle on the master: ${JSON.stringify(seen)}`)
    await sleep(50)
  }
  announced.stopAccepting()
  mapped = await new TcpProxy(master.port).start()
  raw = new Redis({ port: master.port, host: '127.0.0.1', password: PASSWORD, maxRetriesPerRequest: 1 })
  raw.on('error', () => {})
  clients.push(raw)
})

after(async () => {
  for (const c of clients) c.disconnect()
  await Promise.all([sentinel?.close(), master?.close()])
  await Promise.all([announced?.close(), mapped?.close()])
})

function sentinelOptions(natMap) {
  return { sentinels: [{ host: '127.0.0.1', port: sentinel.port }], name: NAME, password: PASSWORD, natMap }
}

const through = (port) => ({ [`127.0.0.1:${announced.port}`]: { host: '127.0.0.1', port } })

test('the set announces the master at the closed address (what the map has to fix)', async () => {
  const addr = await watcher.call('SENTINEL', 'get-master-addr-by-name', NAME)
  assert.deepEqual(addr, ['127.0.0.1', String(announced.port)])
  const reached = await new Promise((resolve) => {
    const socket = net.connect(announced.port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
  assert.equal(reached, false, 'the announced port still accepts')
})

test('{ sentinels, name, natMap }: the lookup and the locks go through the map to the master', async () => {
  const before = mapped.accepted
  const locks = new DistributedLock(sentinelOptions(through(mapped.port)), OPTIONS)
  const handle = await locks.acquire('snat:options', 5000)
  assert.ok(await raw.pttl('lock:snat:options') > 0, 'the key is on the master')
  await handle.release()
  assert.equal(await raw.exists('lock:snat:options'), 0, 'released on the master')
  // At least the ROLE check and the connection the lock went on.
  assert.ok(mapped.accepted - before >= 2, `${mapped.accepted - before} connections through the map`)
})

test('an ioredis Sentinel client with natMap: read as it is, locks on the master through the map', async () => {
  const client = new Redis({ ...sentinelOptions(through(mapped.port)), lazyConnect: true })
  clients.push(client)
  const before = mapped.accepted
  const exclusive = new ExclusiveLock({ name: 'snat-ioredis', cache_connection: client, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
  assert.equal(await exclusive.acquire(), true)
  assert.ok((await raw.keys('*snat-ioredis*')).length > 0, 'the exclusive lock is on the master')
  await exclusive.release()
  assert.ok(mapped.accepted > before, 'nothing went through the map')
  assert.equal(client.status, 'wait', 'the client was only read, not connected')
})

test('without the map the announced address is dialled and refused: an error, not a hang, no password', async () => {
  const locks = new DistributedLock(sentinelOptions(undefined), OPTIONS)
  const started = Date.now()
  const err = await locks.acquire('snat:none', 2000).then(() => null, (e) => e)
  assert.ok(err, 'acquired without the map')
  assert.ok(['ECONNECTION', 'ETIMEDOUT'].includes(err.code), err.stack)
  assert.match(err.message, new RegExp(`sentinels 127\\.0\\.0\\.1:${sentinel.port} for master "mymaster"`))
  assert.ok(Date.now() - started < 8000, `${Date.now() - started} ms`)
  assert.ok(!err.message.includes(PASSWORD), err.message)
  assert.equal(await raw.exists('lock:snat:none'), 0)
})

test('a map to a closed port: the error names the announced and the dialled address, no password', async () => {
  const closed = await freePort()
  const locks = new DistributedLock(sentinelOptions(through(closed)), OPTIONS)
  const err = await locks.acquire('snat:closed', 2000).then(() => null, (e) => e)
  assert.ok(err, 'acquired through a closed port')
  assert.equal(err.code, 'ECONNECTION', err.stack)
  assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${announced.port}, reached through natMap at 127\\.0\\.0\\.1:${closed}`))
  assert.match(err.message, /mymaster/)
  assert.ok(!err.message.includes(PASSWORD), err.message)
})

test('natMap beside sentinels: refusals name the argument, before any call', () => {
  const sentinels = [{ host: '127.0.0.1', port: 1 }]
  const route = { host: '127.0.0.1', port: 1 }
  refused(() => new DistributedLock({ sentinels, name: 'm', natMap: () => route }), 'redis.natMap')
  refused(() => new DistributedLock({ sentinels, name: 'm', natMap: [route] }), 'redis.natMap')
  refused(() => new DistributedLock({ sentinels, name: 'm', natMap: { '10.0.0.1:1': 'nowhere' } }), "redis.natMap['10.0.0.1:1']")
  refused(() => new DistributedLock({ sentinels, name: 'm', natMap: { '10.0.0.1:1': { host: '127.0.0.1', port: 70000 } } }), "redis.natMap['10.0.0.1:1'].port")
  const fn = new Redis({ sentinels, name: 'm', natMap: () => route, lazyConnect: true })
  clients.push(fn)
  assert.match(refused(() => new DistributedLock(fn), 'natMap').message, /function is not supported/)
  // An object on an ioredis Sentinel client is read: no refusal, nothing dialled yet.
  const object = new Redis({ sentinels, name: 'm', natMap: { '10.0.0.1:6379': route }, lazyConnect: true })
  clients.push(object)
  assert.ok(new DistributedLock(object))
})
