'use strict'

// A Redis Cluster whose nodes require a password (requirepass, masterauth), and an ACL user,
// reached through an ioredis Cluster whose redisOptions carry the credentials, and through a
// redis+cluster:// URL holding them: locks land on every master. A wrong password, or none,
// fails with EAUTH within the call's bound, never quoting the password. Nodes are stopped by
// pid.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { RedisCluster } = require('./helpers/redis-cluster')
const { DistributedLock, ExclusiveLock } = require('..')

const PASSWORD = 'cluster-pw-9f3'
const USER = { name: 'locker', password: 'locker-pw-4c1' }

let cluster
let masters = []
const clients = []

before(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 0, password: PASSWORD, user: USER })
  masters = await cluster.masterPorts()
})

after(async () => {
  for (const client of clients) client.disconnect()
  await cluster?.close()
})

/** An ioredis Cluster of the seeds with `redisOptions`, never connected by the test. */
function ioredisCluster(redisOptions) {
  const client = new Redis.Cluster(cluster.seeds, { lazyConnect: true, redisOptions })
  clients.push(client)
  return client
}

/** A lock on a key of each master, its token there, then released there. */
async function lockOnEveryMaster(locks, label) {
  const keys = []
  for (const port of masters) keys.push([port, await cluster.keyOn(port, `auth-${label}:`, 'lock:')])
  await cluster.lockEach(locks, keys, label)
}

test('an ioredis Cluster with redisOptions.password: locks work on every master', async () => {
  const client = ioredisCluster({ password: PASSWORD })
  await lockOnEveryMaster(new DistributedLock(client), 'password')
  const exclusive = new ExclusiveLock({ name: 'auth-exclusive', cache_connection: client, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
  assert.equal(await exclusive.acquire(), true)
  await exclusive.release()
  assert.equal(client.status, 'wait', 'the client was only read, not connected')
})

test('an ioredis Cluster with redisOptions.username and password: locks work, as that ACL user', async () => {
  const locks = new DistributedLock(ioredisCluster({ username: USER.name, password: USER.password }))
  await lockOnEveryMaster(locks, 'user')
  for (const port of masters) {
    const list = await cluster.command(port, 'CLIENT', 'LIST')
    assert.match(list, new RegExp(`user=${USER.name} `), `no connection of ${USER.name} on ${port}`)
  }
})

test('a redis+cluster:// URL with the password: locks work on every master', async () => {
  assert.ok(cluster.url.includes('@'), cluster.url)
  await lockOnEveryMaster(new DistributedLock(cluster.url), 'url')
})

test('a wrong password, or none: EAUTH within the bound, never quoting the password', async () => {
  const options = { connectTimeoutMs: 1000, commandTimeoutMs: 1000 }
  const cases = [
    ['a wrong password', ioredisCluster({ password: 'not-the-pw-77' }), /./],
    ['a wrong ACL password', ioredisCluster({ username: USER.name, password: 'not-the-pw-77' }), /./],
    ['no password', ioredisCluster({}), /a password is required/],
  ]
  for (const [label, client, says] of cases) {
    const locks = new DistributedLock(client, options)
    const started = Date.now()
    const err = await locks.acquire('auth-refused', 1000).then(
      () => assert.fail(`${label}: acquired`),
      (e) => e,
    )
    const took = Date.now() - started
    assert.equal(err.code, 'EAUTH', `${label}: ${err.code} ${err.message}`)
    assert.match(err.message, says, label)
    assert.ok(!err.message.includes('not-the-pw-77') && !err.message.includes(PASSWORD), `${label} quoted a password: ${err.message}`)
    assert.ok(took < 5000, `${label}: took ${took} ms`)
  }
})
