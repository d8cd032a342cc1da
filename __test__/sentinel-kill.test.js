'use strict'

// A Sentinel set (1 master, 1 replica, 3 sentinels, real processes; down-after 1 s,
// failover-timeout 3 s) whose master is killed with SIGKILL, as a crash is: no SENTINEL
// FAILOVER, the sentinels find it down and promote the replica by themselves. Holders with
// autoRefresh on DistributedLock and ExclusiveLock, through redis+sentinel://, are each told
// the move exactly once: `suspended` when the connection drops, then `resumed` when the lock
// reached the replica, or lost when it did not (asynchronous replication can lose the last
// writes; here that is made certain for one lock of each API by deleting its key on the
// replica before the kill, and the other is waited for with WAIT). Meanwhile contenders on
// their own connections try the same keys all along: no two of them ever hold a key at once,
// a holder counting as holding from its acquisition to its `suspended` and again from its
// `resumed`. New acquisitions reach the promoted replica. No speed is asserted: the waits for
// the promotion and for a new acquisition end before the kept locks' keys would expire on the
// replica, so a slow machine fails with a timeout saying so rather than with a contender
// holding a kept lock. Those waits are bounded by the kept keys' TTL: the keys live TTL (15 s)
// on the replica from their last write, and their holders need a refresh interval (TTL / 3)
// and a second more to refresh them there once it is promoted, which leaves about 9 s from
// the kill (15 s - 5 s - 1 s, less the few ms since the keys were written; its diagnostic
// prints it) for the promotion and a new acquisition together. Waiting longer would let a kept
// key expire on the new master before its holder refreshes it, so that a contender takes it
// and the test fails as two holders at once instead of saying the promotion was slow.
// Servers are stopped by pid.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { RedisSentinelSet } = require('./helpers/redis-sentinel')
const { DistributedLock, ExclusiveLock } = require('..')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// Well past the failure's detection (1 s) and the promotion: a lock that reached the replica
// is still there when its holder refreshes it on the new master.
const TTL = 15_000

let set

before(async () => {
  set = await RedisSentinelSet.start()
})

after(async () => {
  await set?.close()
})

/** A key's holders over time: `[{ who, from, to }]`, `to` Infinity while still holding. */
class Holdings {
  spans = []
  open = new Map()

  start(who) {
    if (this.open.has(who)) return
    const span = { who, from: Date.now(), to: Infinity }
    this.open.set(who, span)
    this.spans.push(span)
  }

  stop(who) {
    const span = this.open.get(who)
    if (!span) return
    span.to = Date.now()
    this.open.delete(who)
  }

  /** Two spans of different holders that overlap, or null. */
  overlap() {
    for (const a of this.spans) {
      for (const b of this.spans) {
        if (a !== b && a.who !== b.who && a.from < b.to && b.from < a.to) return [a, b]
      }
    }
    return null
  }
}

/** Events of one holder in order, and a span of `holdings` kept in step with them. */
function follow(holdings, who) {
  const events = []
  const times = []
  const note = (event) => {
    events.push(event)
    times.push(Date.now())
    if (event === 'resumed') holdings.start(who)
    else holdings.stop(who)
  }
  return { events, times, note }
}

test('SIGKILL of the master: each holder told once (suspended, then resumed or lost), new acquisitions on the promoted replica, never two holders of a key', async (t) => {
  const oldPort = await set.masterPort()
  const newPort = set.servers.find((s) => s.port !== oldPort).port
  const onOld = set.client(oldPort)
  const onNew = set.client(newPort)
  const bounds = { connectTimeoutMs: 1000, commandTimeoutMs: 1000 }
  const locks = new DistributedLock(set.url, bounds)
  // Contenders on connections of their own (other settings): their attempts go to Redis.
  const rivals = new DistributedLock(set.url, { connectTimeoutMs: 900, commandTimeoutMs: 900 })

  const keys = { dKept: 'sk:kept', dLost: 'sk:lost', xKept: 'sk-x-kept', xLost: 'sk-x-lost' }
  const holdings = Object.fromEntries(Object.values(keys).map((k) => [k, new Holdings()]))
  const followed = {}
  // Registered before the acquisitions: whatever fails after the first, no holder is left
  // refreshing (an entry without its handle yet releases nothing).
  t.after(() => Promise.all(Object.values(followed).map(({ handle, lock }) => (handle ?? lock)?.release().catch(() => {}))))

  for (const name of [keys.dKept, keys.dLost]) {
    const { events, times, note } = follow(holdings[name], 'holder')
    followed[name] = { events, times, handle: null }
    followed[name].handle = await locks.acquire(name, TTL, {
      autoRefresh: true,
      onSuspended: () => note('suspended'),
      onResumed: () => note('resumed'),
      onLost: () => note('lost'),
    })
    holdings[name].start('holder')
  }
  for (const name of [keys.xKept, keys.xLost]) {
    const { events, times, note } = follow(holdings[name], 'holder')
    const lock = new ExclusiveLock({ name, cache_connection: set.url, lock_ttl_ms: TTL, lock_refresh_ms: 5000 })
    lock.on('suspended', () => note('suspended'))
    lock.on('resumed', () => note('resumed'))
    lock.on('error', (err) => note(err.code === 'ELOST' ? 'lost' : `error ${err.code}`))
    followed[name] = { events, times, lock }
    assert.equal(await lock.acquire(), true, `${name} not acquired`)
    holdings[name].start('holder')
  }

  // The contenders: each key tried every 50 ms, held 30 ms when got, all through the kill.
  let killedAt
  let contending = true
  const got = Object.fromEntries(Object.values(keys).map((k) => [k, 0]))
  const contenders = [
    ...[keys.dKept, keys.dLost].map(async (name) => {
      while (contending) {
        const handle = await rivals.tryAcquire(name, 2000).catch(() => null)
        if (handle) {
          holdings[name].start('rival')
          got[name]++
          await sleep(30)
          holdings[name].stop('rival')
          await handle.release().catch(() => {})
        }
        await sleep(50)
      }
    }),
    ...[keys.xKept, keys.xLost].map(async (name) => {
      // Other settings than the holder's: a native lock of its own, which asks Redis.
      const rival = new ExclusiveLock({ name, cache_connection: set.url, lock_ttl_ms: 2000, lock_refresh_ms: 1000 })
      rival.on('error', () => {})
      while (contending) {
        if (await rival.acquire().catch(() => false)) {
          holdings[name].start('rival')
          got[name]++
          await sleep(30)
          holdings[name].stop('rival')
          await rival.release().catch(() => {})
        }
        await sleep(50)
      }
    }),
  ]

  let landing
  let landingOn = true
  try {
    // Both locks of each API on the replica; then the lost ones taken off it, as replication
    // lags behind a crash.
    const lostKeys = ['lock:sk:lost', 'exclusive-lock:sk-x-lost']
    const keptKeys = ['lock:sk:kept', 'exclusive-lock:sk-x-kept']
    assert.ok((await onOld.call('WAIT', '1', '2000')) >= 1, 'nothing reached the replica')
    for (const key of [...lostKeys, ...keptKeys]) assert.ok(await onNew.pttl(key) > 0, `${key} was not replicated`)
    await onNew.config('SET', 'replica-read-only', 'no')
    await onNew.del(...lostKeys)
    await onNew.config('SET', 'replica-read-only', 'yes')

    // The kept locks' keys live this long on the replica unless their holders refresh them
    // there: every wait below ends well before, leaving a refresh interval (TTL / 3) and a
    // second for the holders to do so once the replica is promoted.
    const keptLeft = Math.min(...(await Promise.all(keptKeys.map((key) => onNew.pttl(key)))))
    const waitMs = keptLeft - TTL / 3 - 1000
    assert.ok(waitMs > 0, `the kept keys have only ${keptLeft} ms left on the replica`)
    killedAt = Date.now()
    await set.server(oldPort).kill()
    // New acquisitions tried from the kill on, until one lands on the promoted replica.
    landing = (async () => {
      for (const deadline = killedAt + waitMs; landingOn && Date.now() < deadline; await sleep(100)) {
        const handle = await locks.acquire('sk:after', 2000).catch(() => null)
        const there = handle !== null && (await onNew.pttl('lock:sk:after').catch(() => 0)) > 0
        if (handle) await handle.release().catch(() => {})
        if (there) return Date.now()
      }
      return Infinity
    })()
    // Every sentinel names the new master, and it answers ROLE as one.
    const to = await set.promoted(oldPort, Math.max(killedAt + waitMs - Date.now(), 1)).catch((err) => {
      throw new Error(`no promotion within ${waitMs} ms of the kill, before the kept locks' keys would expire on the replica (${keptLeft} ms): ${err.message}`)
    })
    const promotedAt = Date.now()
    assert.equal(to, newPort)
    const landedAt = await landing
    assert.ok(landedAt !== Infinity, `no new acquisition reached the new master within ${waitMs} ms of the kill, before the kept locks' keys would expire there`)
    t.diagnostic(`promoted ${promotedAt - killedAt} ms after the kill; a new acquisition on the new master ${landedAt - killedAt} ms after the kill (waits bounded at ${waitMs} ms; kept keys had ${keptLeft} ms left)`)
    const exclusiveAfter = new ExclusiveLock({ name: 'sk-x-after', cache_connection: set.url, lock_ttl_ms: TTL, lock_refresh_ms: 5000 })
    t.after(() => exclusiveAfter.release().catch(() => {}))
    assert.equal(await exclusiveAfter.acquire(), true, 'ExclusiveLock did not acquire after the promotion')
    assert.ok(await onNew.pttl('exclusive-lock:sk-x-after') > 0, 'the ExclusiveLock is not on the new master')
    await exclusiveAfter.release()

    // Every holder told, by a refresh on the new master (one interval at most, TTL / 3).
    const told = () => Object.values(followed).every(({ events }) => events.length >= 2)
    for (const deadline = Date.now() + TTL / 3 + 5000; !told() && Date.now() < deadline;) await sleep(100)
    // Time for a second drop, or a late event, to show.
    await sleep(2000)
  } finally {
    contending = false
    landingOn = false
    await Promise.all([...contenders, landing])
  }

  const seen = Object.fromEntries(Object.entries(followed).map(([name, { events }]) => [name, events]))
  const when = Object.entries(followed).map(([name, { events, times }]) => `${name} ${events.map((e, i) => `${e} +${times[i] - killedAt}`).join(' ')}`)
  t.diagnostic(`told (ms after the kill): ${when.join('; ')}; contenders' acquisitions: ${JSON.stringify(got)}`)
  for (const [name, events] of Object.entries(seen)) {
    assert.ok(
      ['suspended,resumed', 'suspended,lost'].includes(events.join(',')),
      `${name}: told ${events.join(', ') || 'nothing'}, not suspended then resumed or lost`,
    )
  }
  // The locks taken off the replica are lost; the others were there, and are kept.
  assert.deepEqual(seen, {
    [keys.dKept]: ['suspended', 'resumed'],
    [keys.dLost]: ['suspended', 'lost'],
    [keys.xKept]: ['suspended', 'resumed'],
    [keys.xLost]: ['suspended', 'lost'],
  })
  for (const [name, h] of Object.entries(holdings)) {
    const both = h.overlap()
    assert.equal(both, null, `${name}: two holders at once: ${JSON.stringify(both)}`)
  }
  // The kept locks stayed held: no contender ever got them. The lost ones were free on the new
  // master: a contender got each.
  assert.equal(got[keys.dKept], 0)
  assert.equal(got[keys.xKept], 0)
  assert.ok(got[keys.dLost] > 0, 'no contender got the lost DistributedLock on the new master')
  assert.ok(got[keys.xLost] > 0, 'no contender got the lost ExclusiveLock on the new master')

  // The kept holders still hold, on the new master.
  await followed[keys.dKept].handle.release()
  assert.equal(await onNew.exists('lock:sk:kept'), 0, 'not released on the new master')
  await followed[keys.xKept].lock.release()
  assert.equal(await onNew.exists('exclusive-lock:sk-x-kept'), 0, 'not released on the new master')
  await followed[keys.dLost].handle.release().catch(() => {})
})
