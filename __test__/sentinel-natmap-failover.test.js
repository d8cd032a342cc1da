'use strict'

// A Sentinel set (1 master, 1 replica, 3 sentinels, real processes) behind NAT, through a
// failover: every data server asks for a password and is announced at a forwarder that admits
// only the set's own processes (they dial from 127.0.0.2), so a client reaches a server only
// through the forwarder `natMap` names for it (helpers/redis-sentinel.js, `nat: true`).
// 1. Without the map the announced addresses turn the client away: an error, not a hang.
// 2. The first sentinel silent (SIGSTOP): the lookup asks the sentinels at once, so it ends
//    within one connect timeout, where asking them in turn would use up the call's bound.
// 3. `SENTINEL FAILOVER` with locks held through the map: a lock whose key the promoted
//    replica lacks is told lost (DistributedLock's onLost, ExclusiveLock's `error`); a lock
//    whose key was replicated is kept, refreshed on the new master; new acquisitions reach
//    the new master through its mapped forwarder within seconds; no announced address dialled.
// No error carries the password. Servers are stopped by pid; the tests run in file order.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { RedisSentinelSet } = require('./helpers/redis-sentinel')
const { told, within } = require('./helpers/told')
const { DistributedLock, ExclusiveLock, LockLostError } = require('..')

const PASSWORD = 'hunter2'
const BOUNDS = { connectTimeoutMs: 1000, commandTimeoutMs: 1000 }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let set

before(async () => {
  set = await RedisSentinelSet.start({ password: PASSWORD, nat: true })
})

after(async () => {
  await set?.close()
})

/** The set as our options name it, with the password and, unless `natMap: undefined`, the map. */
function settings(extra = {}) {
  return { ...set.options, password: PASSWORD, natMap: set.natMap, ...extra }
}

/** Connections the announced forwarders turned away (a client that dialled them). */
function turnedAway() {
  return [...set.forwarders.values()].reduce((sum, { announced }) => sum + announced.turnedAway, 0)
}

/**
 * Runs `take` until it lands the lock's raw `key` on the server on `port` (the old master may
 * take writes for a moment after the promotion): ms from `since`, or Infinity after 8 s.
 */
async function landOn(port, key, since, take) {
  const server = set.client(port)
  for (;;) {
    const release = await take().catch(() => null)
    const there = release !== null && (await server.pttl(key)) > 0
    if (release) await release().catch(() => {})
    if (there) return Date.now() - since
    if (Date.now() - since > 8000) return Infinity
    await sleep(100)
  }
}

test('without the map the announced addresses turn the client away: an error in bounds, no password', async () => {
  const before = turnedAway()
  const locks = new DistributedLock(settings({ natMap: undefined }), BOUNDS)
  const started = Date.now()
  const err = await locks.acquire('nf:unmapped', 2000).then(() => null, (e) => e)
  assert.ok(err, 'acquired through an announced address')
  assert.ok(['ECONNECTION', 'ETIMEDOUT'].includes(err.code), err.stack)
  assert.ok(Date.now() - started < 8000, `${Date.now() - started} ms`)
  assert.ok(!err.message.includes(PASSWORD), err.message)
  assert.ok(turnedAway() > before, 'the announced forwarders were never dialled')
})

test('a silent first sentinel: the others are asked meanwhile, and the lookup ends within one connect timeout', async () => {
  const master = await set.masterPort()
  const silent = set.sentinels[0]
  // The first lookup of these settings (the test above used no map). Kept short: a sentinel
  // stopped for 2 s or more enters TILT mode and would not act in the failover below.
  const locks = new DistributedLock(settings(), BOUNDS)
  process.kill(silent.pid, 'SIGSTOP')
  try {
    const started = Date.now()
    // Asked in turn, the silent sentinel would hold the lookup for its whole connect timeout,
    // the call's whole bound: the call would fail.
    const handle = await locks.acquire('nf:silent', 5000)
    const took = Date.now() - started
    assert.ok(took < BOUNDS.connectTimeoutMs, `the lookup took ${took} ms`)
    assert.ok(await set.client(master).pttl('lock:nf:silent') > 0, 'the key is not on the master')
    await handle.release()
  } finally {
    process.kill(silent.pid, 'SIGCONT')
  }
})

test('SENTINEL FAILOVER through natMap: a lock missing on the new master is told lost, a replicated one kept; new acquisitions reach the new master', async (t) => {
  const oldPort = await set.masterPort()
  const newPort = set.servers.find((s) => s.port !== oldPort).port
  const awayBefore = turnedAway()
  const locks = new DistributedLock(settings(), BOUNDS)
  // A TTL well past the promotion: the holders are told by the re-check on the new master.
  const TTL = 10_000
  const [lost, tellLost] = told()
  const [keptLost, tellKeptLost] = told()
  const gone = await locks.acquire('nf:lost', TTL, { autoRefresh: true, onLost: tellLost })
  const kept = await locks.acquire('nf:kept', TTL, { autoRefresh: true, onLost: tellKeptLost })
  const exclusive = new ExclusiveLock({ name: 'nf-lost', cache_connection: settings(), lock_ttl_ms: TTL, lock_refresh_ms: 3000 })
  const [errored, tellErrored] = told()
  exclusive.on('error', tellErrored)
  assert.equal(await exclusive.acquire(), true)
  const acquiredAt = Date.now()
  const onOld = set.client(oldPort)
  for (const key of ['lock:nf:lost', 'lock:nf:kept', 'exclusive-lock:nf-lost']) {
    assert.ok(await onOld.pttl(key) > 0, `${key} is not on the master`)
  }
  assert.ok(set.forwarders.get(oldPort).mapped.accepted > 0, 'nothing went through the master\'s mapped forwarder')

  // What asynchronous replication loses when a master fails before sending a write: the lost
  // locks' keys deleted on the replica (made writable for that), the kept one left there.
  const onNew = set.client(newPort)
  await onOld.call('WAIT', '1', '2000')
  await onNew.config('SET', 'replica-read-only', 'no')
  const lostKeys = await onNew.keys('*nf*lost*')
  assert.ok(lostKeys.length >= 2, `the lost locks' keys were not replicated: ${lostKeys}`)
  await onNew.del(...lostKeys)
  await onNew.config('SET', 'replica-read-only', 'yes')
  assert.ok(await onNew.pttl('lock:nf:kept') > 0, 'the kept lock was not replicated')
  const mappedBefore = set.forwarders.get(newPort).mapped.accepted

  const { from, to } = await set.failover()
  const promotedAt = Date.now()
  assert.deepEqual([from, to], [oldPort, newPort])
  // New acquisitions on two APIs, started at once: each lands on the new master within seconds.
  const reaching = Promise.all([
    landOn(newPort, 'lock:nf:after', promotedAt, async () => {
      const handle = await locks.acquire('nf:after', TTL)
      return () => handle.release()
    }),
    landOn(newPort, 'exclusive-lock:nf-after', promotedAt, async () => {
      const it = new ExclusiveLock({ name: 'nf-after', cache_connection: settings(), lock_ttl_ms: TTL, lock_refresh_ms: 3000 })
      it.on('error', () => {})
      return (await it.acquire()) ? () => it.release() : null
    }),
  ])
  // Awaited below; a failure before then must not become an unhandled rejection.
  reaching.catch(() => {})

  // Told when a refresh finds the key gone on the new master: before the TTL ends.
  const lostNews = await within(lost, TTL)
  assert.ok(lostNews, 'onLost was not called')
  assert.ok(lostNews.value instanceof LockLostError, String(lostNews.value))
  assert.equal(lostNews.value.code, 'ELOST')
  assert.ok(!lostNews.value.message.includes(PASSWORD), lostNews.value.message)
  const exNews = await within(errored, TTL)
  assert.ok(exNews, 'ExclusiveLock emitted no error')
  assert.equal(exNews.value.code, 'ELOST', String(exNews.value))
  assert.ok(!exNews.value.message.includes(PASSWORD), exNews.value.message)
  for (const at of [lostNews.at, exNews.at]) assert.ok(at < acquiredAt + TTL, `told ${at - acquiredAt} ms after the acquisition`)
  t.diagnostic(`told lost ${lostNews.at - promotedAt} ms (DistributedLock), ${exNews.at - promotedAt} ms (ExclusiveLock) after the promotion`)

  // The replicated lock is the same lock on the new master (its token came with it): its
  // holder is not told anything, and its refreshes now extend it there: its expiry on the new
  // master (PEXPIRETIME, ms since the epoch) moves on.
  const expiry = async () => Number(await onNew.call('PEXPIRETIME', 'lock:nf:kept'))
  const first = await expiry()
  assert.ok(first > 0, 'the kept lock is not on the new master')
  let refreshed = false
  for (const deadline = Date.now() + 6000; !refreshed && Date.now() < deadline; await sleep(100)) {
    refreshed = (await expiry()) > first
  }
  assert.ok(refreshed, 'the kept lock was never refreshed on the new master')
  assert.equal(await within(keptLost, 0), null, 'the holder of the replicated lock was told it lost it')
  await kept.release()
  assert.equal(await onNew.exists('lock:nf:kept'), 0, 'released on the new master')

  const [dlMs, exMs] = await reaching
  t.diagnostic(`on the new master ${dlMs} ms (DistributedLock), ${exMs} ms (ExclusiveLock) after the promotion`)
  assert.ok(dlMs < 5000 && exMs < 5000, `reached the new master after ${dlMs} and ${exMs} ms`)
  assert.ok(set.forwarders.get(newPort).mapped.accepted > mappedBefore, 'the new master was not reached through its mapped forwarder')
  assert.equal(turnedAway(), awayBefore, 'an announced address was dialled')
  await gone.release().catch(() => {})
  await exclusive.release().catch(() => {})
})
