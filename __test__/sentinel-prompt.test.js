'use strict'

// A Sentinel set (1 master, 1 replica, 3 sentinels, real processes, no natMap) told of a
// failover promptly:
// 1. A holder that only auto-refreshes (no other call on its connection) is told a lock the
//    promoted replica lacks within about one refresh interval of the sentinels naming the new
//    master, where the re-check its refresh starts would otherwise wait for the refresh after;
//    a lock whose key reached the replica is kept, refreshed on the new master, its holder
//    told nothing.
// 2. The first sentinel silent (SIGSTOP, by pid): the sentinels are asked at once, so the
//    lookups of calls bounded by a second succeed, before and across a forced failover (asked
//    of the others), and a refresh-only holder is still told.
// 3. A master move is one drop: a holder is told `suspended` once, then `resumed`, and the
//    watchdog re-checks its lock once (one refresh pipeline), not again for the switch.
// Servers are stopped by pid; the tests run in file order (each fails over from the last).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { RedisSentinelSet } = require('./helpers/redis-sentinel')
const { told, within } = require('./helpers/told')
const { DistributedLock, LockLostError } = require('..')
const { watchdogStats } = require('../lib/native')

const BOUNDS = { connectTimeoutMs: 1000, commandTimeoutMs: 1000 }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let set

before(async () => {
  set = await RedisSentinelSet.start()
})

after(async () => {
  await set?.close()
})

/**
 * What asynchronous replication loses when a master fails before sending a write: `lost`
 * keys deleted on the replica on `replicaPort` (made writable for that), `kept` ones checked
 * there.
 */
async function loseOnReplica(masterPort, replicaPort, lost, kept) {
  await set.client(masterPort).call('WAIT', '1', '2000')
  const replica = set.client(replicaPort)
  for (const key of [...lost, ...kept]) assert.ok(await replica.pttl(key) > 0, `${key} was not replicated`)
  await replica.config('SET', 'replica-read-only', 'no')
  await replica.del(...lost)
  await replica.config('SET', 'replica-read-only', 'yes')
}

/** Until `check` (async) holds, polled every 100 ms for `ms`: whether it did. */
async function eventually(check, ms) {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(100)) {
    if (await check()) return true
  }
  return check()
}

test('a holder that only refreshes is told within a refresh interval of the promotion; a replicated lock is kept', async (t) => {
  const oldPort = await set.masterPort()
  const newPort = set.servers.find((s) => s.port !== oldPort).port
  // Locks of their own (settings no other test uses): nothing but their refreshes is sent on
  // their connection, which is what starts the re-check of the sentinels.
  const locks = new DistributedLock(set.url, { connectTimeoutMs: 1500 })
  // A refresh every 6 s: the promotion comes early in the first interval, so the refresh
  // after next would come about 10 s after it.
  const TTL = 18_000
  const INTERVAL = TTL / 3
  const [lost, tellLost] = told()
  const [keptLost, tellKeptLost] = told()
  const gone = await locks.acquire('sp:lost', TTL, { autoRefresh: true, onLost: tellLost })
  const kept = await locks.acquire('sp:kept', TTL, { autoRefresh: true, onLost: tellKeptLost })
  const acquiredAt = Date.now()
  await loseOnReplica(oldPort, newPort, ['lock:sp:lost'], ['lock:sp:kept'])

  const { from, to } = await set.failover()
  const promotedAt = Date.now()
  assert.deepEqual([from, to], [oldPort, newPort])
  const onNew = set.client(newPort)
  const expiry = async () => Number(await onNew.call('PEXPIRETIME', 'lock:sp:kept'))
  const first = await expiry()
  assert.ok(first > 0, 'the kept lock is not on the new master')

  // One refresh interval (the refresh that starts the re-check), the re-check's bound (its
  // connect timeout) and a second for a loaded machine.
  const bound = INTERVAL + 1500 + 1000
  const news = await within(lost, acquiredAt + TTL - Date.now())
  assert.ok(news, 'onLost was not called before the TTL ended')
  t.diagnostic(`told lost ${news.at - promotedAt} ms after the promotion (${promotedAt - acquiredAt} ms after the acquisition)`)
  assert.ok(news.value instanceof LockLostError, String(news.value))
  assert.equal(news.value.code, 'ELOST')
  assert.ok(news.at - promotedAt < bound, `told ${news.at - promotedAt} ms after the promotion, more than ${bound} ms`)
  const handleLost = await within(gone.lost, 1000)
  assert.equal(handleLost?.code, 'ELOST', 'handle.lost did not settle with ELOST')

  // The replicated lock is the same lock on the new master: refreshed there, never told.
  assert.ok(await eventually(async () => (await expiry()) > first, INTERVAL + 3000), 'the kept lock was never refreshed on the new master')
  assert.equal(await within(keptLost, 0), null, 'the holder of the replicated lock was told it lost it')
  await kept.release()
  assert.equal(await onNew.exists('lock:sp:kept'), 0, 'released on the new master')
  await gone.release().catch(() => {})
})

test('the first sentinel silent: calls bounded by a second look the master up in time, across a forced failover', async (t) => {
  let master = await set.masterPort()
  const replicaPort = set.servers.find((s) => s.port !== master).port
  // The previous test's old master rejoined as a replica: the failover below needs it synced.
  await set.replicaSeen(master, replicaPort)
  const silent = set.sentinels[0]
  const others = set.sentinels.slice(1)
  const locks = new DistributedLock(set.url, BOUNDS)
  const holders = new DistributedLock(set.url, { ...BOUNDS, connectTimeoutMs: 900 })
  process.kill(silent.pid, 'SIGSTOP')
  try {
    // A first lookup: asked in turn, the silent sentinel would use up the call's bound.
    const started = Date.now()
    const handle = await locks.acquire('sp:silent', 5000)
    const took = Date.now() - started
    assert.ok(took < BOUNDS.connectTimeoutMs, `the lookup took ${took} ms`)
    assert.ok(await set.client(master).pttl('lock:sp:silent') > 0, 'the key is not on the master')
    await handle.release()

    const TTL = 9000
    const [lost, tellLost] = told()
    await holders.acquire('sp:silent-lost', TTL, { autoRefresh: true, onLost: tellLost })
    await loseOnReplica(master, replicaPort, ['lock:sp:silent-lost'], [])

    const { from, to } = await set.failover(others)
    const promotedAt = Date.now()
    assert.deepEqual([from, to], [master, replicaPort])
    master = to

    // New acquisitions reach the new master within seconds, then each succeeds in its bound.
    const onNew = set.client(master)
    let landed = Infinity
    for (const deadline = promotedAt + 8000; Date.now() < deadline; await sleep(100)) {
      const got = await locks.acquire('sp:after', 5000).catch(() => null)
      const there = got !== null && (await onNew.pttl('lock:sp:after')) > 0
      if (got) await got.release().catch(() => {})
      if (there) {
        landed = Date.now() - promotedAt
        break
      }
    }
    t.diagnostic(`on the new master ${landed} ms after the promotion`)
    assert.ok(landed < 5000, `reached the new master after ${landed} ms`)
    for (let i = 0; i < 5; i++) {
      const at = Date.now()
      const got = await locks.acquire(`sp:after:${i}`, 5000)
      assert.ok(Date.now() - at < BOUNDS.commandTimeoutMs, `acquisition ${i} took ${Date.now() - at} ms`)
      assert.ok(await onNew.pttl(`lock:sp:after:${i}`) > 0, `acquisition ${i} is not on the new master`)
      await got.release()
    }

    // The refresh-only holder's re-check asks the sentinels that answer.
    const news = await within(lost, TTL)
    assert.ok(news, 'onLost was not called')
    assert.equal(news.value.code, 'ELOST', String(news.value))
    t.diagnostic(`told lost ${news.at - promotedAt} ms after the promotion`)
    assert.ok(news.at - promotedAt < TTL / 3 + 2500, `told ${news.at - promotedAt} ms after the promotion`)
  } finally {
    process.kill(silent.pid, 'SIGCONT')
  }
})

test('a master move is one drop: its holder is told suspended once, then resumed, after one re-check', async () => {
  const master = await set.masterPort()
  const replicaPort = set.servers.find((s) => s.port !== master).port
  await set.replicaSeen(master, replicaPort)
  // Settings of its own: a connection whose only refreshes are this lock's.
  const settings = { connectTimeoutMs: 1300 }
  const pipelines = () => watchdogStats({ url: set.url, ...settings }).pipelines
  const locks = new DistributedLock(set.url, settings)
  const events = []
  const note = (type) => () => events.push(type)
  // A refresh every 100 s: none falls due while the failover goes on (over 10 s right after
  // another, which the sentinels hold back for a while).
  const handle = await locks.acquire('sp:once', 300_000, {
    autoRefresh: true,
    onSuspended: note('suspended'),
    onResumed: note('resumed'),
    onLost: note('lost'),
  })
  // On the replica before the move: else the holder is rightly told lost, not resumed.
  assert.ok((await set.client(master).call('WAIT', '1', '2000')) >= 1, 'the lock did not reach the replica')
  const sent = pipelines()
  // Calls on the connection, as an application makes them: each may start the re-check of
  // the sentinels that finds the master moved.
  let calling = true
  const calls = (async () => {
    while (calling) {
      await locks.isLocked('sp:once:other').catch(() => {})
      await sleep(100)
    }
  })()
  try {
    // Not the first sentinel: stopped by the previous test, it is in TILT for 30 s after and
    // refuses to fail over.
    const { from, to } = await set.failover(set.sentinels.slice(1))
    assert.deepEqual([from, to], [master, replicaPort])
    assert.ok(await eventually(() => events.length >= 2, 6000), `told only ${events.join(', ') || 'nothing'}`)
    // Time for a second drop, or a re-check sent again, to show.
    await sleep(1500)
  } finally {
    calling = false
    await calls
  }
  assert.deepEqual(events, ['suspended', 'resumed'])
  assert.equal(pipelines() - sent, 1, 'the watchdog re-checked more than once')
  await handle.release()
  assert.equal(await set.client(replicaPort).exists('lock:sp:once'), 0, 'released on the new master')
})
