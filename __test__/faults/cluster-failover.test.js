'use strict'

// One master of a Redis Cluster (3 masters, a replica each) SIGKILLed, by pid: locks on the
// other masters keep working; calls on the dead master's keys fail cleanly (a connection
// error or timeout, never "held") within their bound; its holders are told (onLost, and
// ExclusiveLock's `error`) by their TTL's end; once its replica took over, its keys are locked
// again, with fences above the ones issued before (replicated before the kill).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { RedisCluster } = require('../helpers/redis-cluster')
const { DistributedLock, ExclusiveLock } = require('../..')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let cluster

before(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 1 })
})

after(async () => {
  await cluster?.close()
})

/** `promise`'s settlement, or a failure naming `what` after `ms`: nothing may hang. */
async function within(ms, what, promise) {
  let timer
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** Until `replica` has everything the master at `port` wrote so far. */
async function caughtUp(port, replica) {
  const offset = (info, field) => Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? -1)
  const target = offset(await cluster.command(port, 'INFO', 'replication'), 'master_repl_offset')
  await within(5000, 'the replica catching up', (async () => {
    while (offset(await cluster.command(replica.port, 'INFO', 'replication'), 'slave_repl_offset') < target) await sleep(10)
  })())
}

test('a master killed: the others go on, its keys fail cleanly, its holders are told, its replica takes over', async () => {
  const [dead, ...alive] = await cluster.masterPorts()
  const locks = new DistributedLock(cluster.url, { connectTimeoutMs: 500, commandTimeoutMs: 1000 })
  const deadKey = await cluster.keyOn(dead, 'failover:', 'lock:')
  const before = await locks.acquire(deadKey, 5000)
  await before.release()

  // Holders on the master about to die, and one on a master that stays.
  const told = []
  const doomed = await locks.acquire(deadKey, 800, { autoRefresh: true, onLost: (err) => told.push(['distributed', err, Date.now()]) })
  const exclusiveName = await cluster.keyOn(dead, 'failover-', 'ex:')
  const exclusive = new ExclusiveLock({ name: exclusiveName, key_prefix: 'ex', cache_connection: cluster.url, lock_ttl_ms: 800, lock_refresh_ms: 200 })
  exclusive.on('error', (err) => told.push(['exclusive', err, Date.now()]))
  assert.equal(await exclusive.acquire(), true)
  const survivorKey = await cluster.keyOn(alive[0], 'failover-stays:', 'lock:')
  let survivorLost
  const survivor = await locks.acquire(survivorKey, 800, { autoRefresh: true, onLost: (err) => { survivorLost = err } })

  // Replication is asynchronous: what the replica has not got when its master dies is lost
  // with it (README, Scaling out). Waiting for it here makes the fences' check below exact.
  const replica = await cluster.replicaOf(dead)
  assert.ok(replica, `no replica of ${dead}`)
  await caughtUp(dead, replica)

  const killedAt = Date.now()
  await cluster.node(dead).kill()

  // The other masters: every call answers, as before.
  for (const port of alive) {
    const key = await cluster.keyOn(port, 'failover-other:', 'lock:')
    const handle = await within(3000, `acquire on ${port}`, locks.acquire(key, 2000))
    assert.equal(await within(3000, `isLocked on ${port}`, locks.isLocked(key)), true)
    await within(3000, `release on ${port}`, handle.release())
  }

  // The dead master's keys: a clean error, never ELOCKED, never a hang.
  const err = await within(5000, 'acquire on the dead master', locks.acquire(deadKey, 2000).then(
    (handle) => assert.fail(`acquired ${handle.key} on a dead master`),
    (e) => e,
  ))
  assert.ok(['ECONNECTION', 'ETIMEDOUT'].includes(err.code), `${err.code}: ${err.message}`)

  // Its holders are told by the end of their TTL (a margin for two loaded cores).
  const deadline = killedAt + 800 + 1500
  while (told.length < 2 && Date.now() < deadline) await sleep(20)
  assert.deepEqual(told.map(([who]) => who).sort(), ['distributed', 'exclusive'], `told: ${told.map(([w, e]) => `${w} ${e.code}`)}`)
  for (const [who, e] of told) assert.equal(e.code, 'ELOST', `${who}: ${e.code} ${e.message}`)
  assert.equal(doomed.isHeld, false)
  assert.equal(survivorLost, undefined, 'a holder on a live master was told it lost its lock')
  assert.equal(survivor.isHeld, true)

  // The replica takes over (cluster-node-timeout 1 s, then the election): the keys work again.
  let again
  const until = Date.now() + 20_000
  while (!again) {
    try {
      again = await locks.acquire(deadKey, 2000)
    } catch (e) {
      // Refused, timed out, or the cluster still electing: never "held by someone".
      assert.notEqual(e.code, 'ELOCKED', e.message)
      assert.ok(Date.now() < until, `the dead master's keys never came back: ${e.message}`)
      await sleep(200)
    }
  }
  assert.ok(BigInt(again.fence) > BigInt(doomed.fence), `fence ${again.fence} after ${doomed.fence}`)
  // The lock is on the promoted replica (the nodes' views of it converge within moments).
  assert.equal(await cluster.command(replica.port, 'GET', `lock:${deadKey}`), again.token)
  await again.release()
  await survivor.release()
})
