'use strict'

// A Redis Cluster whose nodes announce addresses nothing listens on (cluster-announce-port set
// to a free port each, after the cluster formed), reached only through ioredis's `natMap`
// mapping each announced address back to the node's real port: given on an ioredis Cluster or
// beside `{ cluster }`, locks land on every master. Without the map the same cluster fails
// (an error, not a hang). Nodes are stopped by pid.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { RedisCluster } = require('./helpers/redis-cluster')
const { freePort } = require('./helpers/redis-server')
const { refused } = require('./helpers/refused')
const { DistributedLock, ExclusiveLock } = require('..')

const OPTIONS = { connectTimeoutMs: 1000, commandTimeoutMs: 2000 }

let cluster
let seeds = []
const natMap = {}
// Per master's real port, a key of each label that it serves.
const keys = new Map()
const clients = []

/** The announced ports every node's CLUSTER SLOTS names. */
async function announcedPorts() {
  const seen = new Set()
  for (const node of cluster.nodes) {
    for (const [, , master] of await cluster.command(node.port, 'CLUSTER', 'SLOTS')) seen.add(master[1])
  }
  return seen
}

before(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 0 })
  const masters = await cluster.masterPorts()
  // Keys picked while the slot map still names the real ports.
  for (const port of masters) {
    keys.set(port, {
      ioredis: await cluster.keyOn(port, 'nat-io:', 'lock:'),
      options: await cluster.keyOn(port, 'nat-opt:', 'lock:'),
      none: await cluster.keyOn(port, 'nat-none:', 'lock:'),
    })
  }
  const fake = new Set()
  const real = new Set(cluster.nodes.map((node) => node.port))
  for (const node of cluster.nodes) {
    // One port each: two nodes announcing the same one left a single entry in natMap for
    // both, and each call was turned away (MOVED) to the same node until its bound.
    let announced
    do announced = await freePort()
    while (fake.has(announced) || real.has(announced))
    fake.add(announced)
    natMap[`127.0.0.1:${announced}`] = { host: '127.0.0.1', port: node.port }
    await cluster.command(node.port, 'CONFIG', 'SET', 'cluster-announce-port', String(announced))
  }
  // Every node names the others by what they announce once gossip carried it.
  const deadline = Date.now() + 20_000
  for (;;) {
    const seen = await announcedPorts()
    if ([...seen].every((port) => fake.has(port))) break
    if (Date.now() > deadline) throw new Error(`the announced ports did not spread: ${[...seen]}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  seeds = cluster.nodes.map((node) => ({ host: '127.0.0.1', port: node.port }))
})

after(async () => {
  for (const client of clients) client.disconnect()
  await cluster?.close()
})

/** A lock on `label`'s key of each master, its token there, then released there. */
function lockOnEveryMaster(locks, label) {
  return cluster.lockEach(locks, [...keys].map(([port, byLabel]) => [port, byLabel[label]]), label)
}

test('an ioredis Cluster with natMap: locks reach every master through the map', async () => {
  const client = new Redis.Cluster(seeds, { lazyConnect: true, natMap })
  clients.push(client)
  await lockOnEveryMaster(new DistributedLock(client, OPTIONS), 'ioredis')
  const exclusive = new ExclusiveLock({ name: 'nat-exclusive', cache_connection: client, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
  assert.equal(await exclusive.acquire(), true)
  await exclusive.release()
  assert.equal(client.status, 'wait', 'the client was only read, not connected')
})

test('{ cluster, natMap } options: locks reach every master through the map', async () => {
  await lockOnEveryMaster(new DistributedLock({ cluster: seeds, natMap }, OPTIONS), 'options')
})

test('without the map the announced addresses are unreachable: the call fails, it does not hang', async () => {
  const locks = new DistributedLock({ cluster: seeds }, OPTIONS)
  const [[port, { none }]] = keys
  await assert.rejects(locks.acquire(none, 10_000))
  assert.equal(await cluster.command(port, 'EXISTS', `lock:${none}`), 0)
})

test('natMap refusals name the argument', () => {
  refused(() => new DistributedLock({ host: '127.0.0.1', port: 1, natMap: { '10.0.0.1:1': { host: '127.0.0.1', port: 1 } } }), 'natMap')
  refused(() => new DistributedLock({ cluster: seeds, natMap: { '10.0.0.1:1': 'nowhere' } }), "redis.natMap['10.0.0.1:1']")
  refused(() => new DistributedLock({ cluster: seeds, natMap: { '10.0.0.1:1': { host: '127.0.0.1', port: -1 } } }), "redis.natMap['10.0.0.1:1'].port")
  refused(() => new DistributedLock({ cluster: seeds, natMap: () => null }), 'redis.natMap')
})
