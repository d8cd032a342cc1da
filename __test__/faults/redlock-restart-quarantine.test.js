'use strict'

// restartQuarantineMs on a Redlock (README "Restart quarantine"): a gate per node. The classic
// Redlock failure without it: a holder's lock stands on nodes 0, 1 and 2 only (its copies on 3
// and 4 gone), node 2 is SIGKILLed and restarted empty, and a contender wins 2, 3 and 4: two
// holders. With the option, a node restarted less than the quarantine ago grants nothing: the
// contender's quorum is counted without it, so it finds the lock held (0 and 1 say so) or,
// with 0 and 1 down too, fails with the quorum error naming how many nodes answered; never a
// second holder. Once the quarantine is over the node counts again. Servers stopped by pid.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../helpers/redis-server')
const { DistributedLock, ExclusiveLock } = require('../..')
const sg = require('../../syncguard')
const Redis = require('ioredis')

const Q = 1500
const TTL_MS = 30_000
const options = { connectTimeoutMs: 500, commandTimeoutMs: 500, maxRetries: 0 }

let servers = []
let admins = []

before(async () => {
  servers = await Promise.all(Array.from({ length: 5 }, () => startRedis()))
  admins = servers.map((server) => new Redis(server.url, { maxRetriesPerRequest: 1 }).on('error', () => {}))
})

after(async () => {
  for (const admin of admins) admin.disconnect()
  await Promise.all(servers.map((server) => server.close()))
})

const urls = () => servers.map((server) => server.url)

/** Holds `key` on all 5 nodes, then leaves its copies on 0, 1 and 2 only, and restarts node 2
 * empty (SIGKILL, same port): the holder's lock now stands on 0 and 1, short of a quorum. */
async function classicCase(holder, key, options) {
  const handle = await holder.acquire(key, TTL_MS, options)
  for (const i of [3, 4]) assert.equal(await admins[i].del(`lock:${key}`), 1)
  await servers[2].kill()
  await servers[2].start()
  return handle
}

test('without the option, the classic case gives a second holder (what the quarantine prevents)', async () => {
  const holder = new DistributedLock(urls(), options)
  const contender = new DistributedLock(urls(), options)
  await classicCase(holder, 'rq:classic')
  const second = await contender.tryAcquire('rq:classic', TTL_MS)
  assert.ok(second, 'the contender won nodes 2, 3 and 4 while the holder still held 0 and 1')
  await second.release()
})

test('with restartQuarantineMs, a node restarted empty grants nothing within it: no second holder', async (t) => {
  const holder = new DistributedLock(urls(), { ...options, restartQuarantineMs: Q })
  const contender = new DistributedLock(urls(), { ...options, restartQuarantineMs: Q })
  // Every node first met now: once the first lock is given (its bound outlasts the
  // quarantine), a quorum is past it; the next gives every node time to be.
  const patient = new DistributedLock(urls(), { ...options, commandTimeoutMs: 3_000, restartQuarantineMs: Q })
  await (await patient.acquire('rq:warm', 5_000)).release()
  const first = await patient.acquire('rq:warm', 5_000)
  await first.release()

  // The holder keeps its lock alive: it is told once a refresh finds no majority.
  let told
  await classicCase(holder, 'rq:guarded', { autoRefresh: true, onLost: () => { told ??= performance.now() } })
  const restarted = performance.now()
  // Nodes 0 and 1 say held, node 2 abstains, 3 and 4 grant: 4 answered, 2 won, held.
  assert.equal(await contender.tryAcquire('rq:guarded', TTL_MS), null)
  for (const i of [2, 3, 4]) assert.equal(await admins[i].exists('lock:rq:guarded'), 0, `node ${i} kept the refused attempt's key`)

  // Nodes 0 and 1 down as well: only 3 and 4 answer; the quorum error, not "held", not a win.
  await Promise.all([servers[0].kill(), servers[1].kill()])
  await assert.rejects(contender.acquire('rq:guarded', TTL_MS), (err) => {
    assert.equal(err.code, 'ECONNECTION', err.message)
    assert.match(err.message, /only 2 of 5 Redlock nodes answered; a quorum is 3/)
    assert.match(err.message, /1 in restart quarantine \(restartQuarantineMs\)/)
    return true
  })
  const refusedAt = performance.now() - restarted
  assert.ok(refusedAt < Q, `the refusals took ${refusedAt} ms: past the quarantine, they prove nothing`)

  // Past the quarantine node 2 counts again: 2, 3 and 4 make a quorum.
  await new Promise((resolve) => setTimeout(resolve, Q - refusedAt + 100))
  const after = await contender.acquire('rq:guarded', TTL_MS)
  const won = performance.now()
  assert.ok(after.fence > 0)
  // What the quarantine is for: the holder was told before anyone else could take its lock.
  assert.ok(told !== undefined && told < won, `the holder was told at ${told} ms, the contender won at ${won} ms`)
  t.diagnostic(`from node 2 back: holder told at ${(told - restarted).toFixed(1)} ms, contender won at ${(won - restarted).toFixed(1)} ms`)
  await after.release()
  await Promise.all([servers[0].start(), servers[1].start()])
})

test('an acquisition waits for a quorum of gates when they open within its bound, on every node first met, on every API', async () => {
  for (const server of servers) await server.kill()
  for (const server of servers) await server.start()
  const started = performance.now()
  const since = () => performance.now() - started
  const waits = await Promise.all([
    (async () => {
      const lock = new DistributedLock(urls(), { ...options, commandTimeoutMs: 3_000, restartQuarantineMs: Q })
      const handle = await lock.acquire('rq:fresh', TTL_MS)
      const took = since()
      await handle.release()
      return ['DistributedLock', took]
    })(),
    (async () => {
      const lock = new ExclusiveLock({ name: 'rq-fresh', cache_connection: urls(), restart_quarantine_ms: Q, lock_ttl_ms: TTL_MS, lock_refresh_ms: TTL_MS / 3 })
      assert.equal(await lock.acquire(), true)
      const took = since()
      await lock.release()
      return ['ExclusiveLock', took]
    })(),
    (async () => {
      const backend = sg.createRedisBackend(urls(), { restartQuarantineMs: Q })
      const won = await backend.acquire({ key: 'rq:fresh:sg', ttlMs: TTL_MS })
      assert.equal(won.ok, true)
      const took = since()
      await backend.release({ lockId: won.lockId })
      return ['syncguard', took]
    })(),
  ])
  for (const [api, took] of waits) {
    // Redis's TIME and our clock, read a few ms apart.
    assert.ok(took >= Q - 50, `${api} acquired ${took.toFixed(1)} ms after 5 fresh nodes were first met`)
  }
})
