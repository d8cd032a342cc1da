'use strict'

// restartQuarantineMs on a Redis Cluster (README "Restart quarantine"): a gate per master, kept
// per hash slot. A master SIGKILLed by pid and its replica promoted is a new incarnation for
// that master's slots: an acquisition there waits for the quarantine (its holders' copies may
// be gone with the dead master), while locks on the other masters go at once.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { RedisCluster } = require('../helpers/redis-cluster')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('../..')
const sg = require('../../syncguard')

const Q = 1500
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// Redis's TIME and our clock, read a few ms apart.
const CLOCKS_MS = 50

let cluster

before(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 1 })
})

after(async () => {
  await cluster?.close()
})

const timed = async (promise) => {
  const started = performance.now()
  const value = await promise
  return [value, performance.now() - started]
}

test('a master failed over: its slots wait for the quarantine, the other masters\' do not', async (t) => {
  const [dead, alive] = await cluster.masterPorts()
  const deadKey = await cluster.keyOn(dead, 'rqc:', 'lock:')
  const aliveKey = await cluster.keyOn(alive, 'rqc:', 'lock:')
  const locks = new DistributedLock(cluster.url, { connectTimeoutMs: 500, commandTimeoutMs: 5_000, restartQuarantineMs: Q })

  // Both slots first met now: each waits the quarantine once.
  const [firsts, firstTook] = await timed(Promise.all([locks.acquire(deadKey, 10_000), locks.acquire(aliveKey, 10_000)]))
  assert.ok(firstTook >= Q - CLOCKS_MS, `the first locks came ${firstTook.toFixed(1)} ms after the slots were first met`)
  await Promise.all(firsts.map((handle) => handle.release()))
  // Known now: at once.
  const [again, againTook] = await timed(locks.acquire(aliveKey, 10_000))
  assert.ok(againTook < Q / 2, `a lock on a slot known open waited ${againTook.toFixed(1)} ms`)
  await again.release()

  const replica = await cluster.replicaOf(dead)
  assert.ok(replica, `no replica of ${dead}`)
  await cluster.node(dead).kill()
  // The live nodes say ok until they mark the master failed: wait for the replica's promotion.
  for (const deadline = Date.now() + 20_000; (await cluster.masterOf(`lock:${deadKey}`)) !== replica.port; await sleep(50)) {
    assert.ok(Date.now() < deadline, 'the replica never took the dead master\'s slots')
  }
  await cluster.waitOk()

  const [[onAlive, aliveTook], [onPromoted, promotedTook]] = await Promise.all([
    timed(locks.acquire(aliveKey, 10_000)),
    timed(locks.acquire(deadKey, 10_000)),
  ])
  assert.ok(aliveTook < Q / 2, `a lock on a master that did not fail over waited ${aliveTook.toFixed(1)} ms`)
  assert.ok(promotedTook >= Q - CLOCKS_MS, `a lock on the promoted replica came ${promotedTook.toFixed(1)} ms after it was first met`)
  t.diagnostic(`after the failover: a lock on another master took ${aliveTook.toFixed(1)} ms, one on the promoted replica ${promotedTook.toFixed(1)} ms`)
  await Promise.all([onAlive.release(), onPromoted.release()])
})

test('a slot first met makes every API wait the quarantine there', async () => {
  const started = performance.now()
  const since = () => performance.now() - started
  const waits = await Promise.all([
    (async () => {
      const lock = new ExclusiveLock({ name: 'rqc-exclusive', cache_connection: cluster.url, restart_quarantine_ms: Q })
      assert.equal(await lock.acquire(), true)
      const took = since()
      await lock.release()
      return ['ExclusiveLock', took]
    })(),
    (async () => {
      const backend = sg.createRedisBackend(cluster.url, { restartQuarantineMs: Q })
      const won = await backend.acquire({ key: 'rqc:syncguard', ttlMs: 10_000 })
      assert.equal(won.ok, true)
      const took = since()
      await backend.release({ lockId: won.lockId })
      return ['syncguard', took]
    })(),
    (async () => {
      const service = new DistributedLockService('rqc:maestro', 10_000, cluster.url, { restartQuarantineMs: Q })
      assert.equal(await service.acquire(), true)
      const took = since()
      await service.release()
      return ['DistributedLockService', took]
    })(),
  ])
  for (const [api, took] of waits) {
    assert.ok(took >= Q - CLOCKS_MS, `${api} acquired ${took.toFixed(1)} ms after its slot was first met`)
  }
})

test('a lock won on a restarted master after a quarantine longer than its TTL comes with its whole TTL, and auto-refresh keeps it', async () => {
  const ports = await cluster.masterPorts()
  const [restarted, other] = [ports[ports.length - 1], ports[0]]
  const key = await cluster.keyOn(restarted, 'rqc:ttl:', 'lock:')
  const otherKey = await cluster.keyOn(other, 'rqc:ttl:', 'lock:')
  const locks = new DistributedLock(cluster.url, { connectTimeoutMs: 500, commandTimeoutMs: 5_000, restartQuarantineMs: Q })
  // Both slots' gates learned (and open) before the restart.
  await Promise.all([key, otherKey].map(async (k) => (await locks.acquire(k, 10_000)).release()))

  await cluster.node(restarted).restart()
  await cluster.waitOk()
  // Whoever serves the slot now (the restarted master, or its replica had it failed over) is
  // a new incarnation to us.
  const owner = await cluster.masterOf(`lock:${key}`)

  const TTL = 1_000
  let lost
  const [[handle, took], [onOther, otherTook]] = await Promise.all([
    timed(locks.acquire(key, TTL, { autoRefresh: true, onLost: (err) => { lost = err } })),
    timed(locks.acquire(otherKey, 10_000)),
  ])
  assert.ok(took >= Q - CLOCKS_MS, `a lock on the restarted master came ${took.toFixed(1)} ms after the restart`)
  assert.ok(otherTook < Q / 2, `the quarantine of one master held a lock on another ${otherTook.toFixed(1)} ms`)
  // Stamped after the gate: the TTL counts from when the attempt went out, not from before
  // the wait (which, longer than the TTL, would have left it spent on arrival).
  const { acquiredAt, expiresAt } = handle.info
  assert.equal(handle.isHeld, true, `came spent: acquired at ${acquiredAt}, expires at ${expiresAt}, now ${Date.now()}`)
  // Not in doubt for the restart's drop, heard before the attempt went out (the watchdog,
  // made at this first autoRefresh hold, once compared the two in whole ms of its own clock,
  // where both read 0: isHeld was then false until the refresh that followed answered).
  assert.equal(handle.suspended, false, 'in doubt on arrival for a drop heard before the attempt')
  assert.ok(Date.now() - acquiredAt < TTL / 2, `stamped ${Date.now() - acquiredAt} ms before the lock was handed over`)
  assert.ok(expiresAt - Date.now() > TTL / 2, `${expiresAt - Date.now()} ms of its ${TTL} ms TTL left`)
  // Auto-refresh keeps it past two TTLs, on the master that serves it.
  await sleep(2 * TTL)
  assert.equal(lost, undefined, `lost: ${lost?.message}`)
  assert.equal(handle.isHeld, true)
  const pttl = await cluster.command(owner, 'PTTL', `lock:${key}`)
  assert.ok(pttl > 0, `PTTL ${pttl} on ${owner}`)
  await Promise.all([handle.release(), onOther.release()])
})
