'use strict'

// What the command line reads and changes in Redis: finds the locks of every API the package
// writes (SCAN, never KEYS), reads one in full, and forces one free. Our APIs' sibling keys
// are named by the core (native lockSiblings); syncguard's by lib/syncguard/redis-keys.js.

const fs = require('node:fs')
const path = require('node:path')
const native = require('../native')
const { ReplyError } = require('./resp')
const { lockKeyOf, indexKeyOf, fenceKeyOf } = require('../syncguard/redis-keys')

const FORCE_RELEASE = fs.readFileSync(path.join(__dirname, 'force-release.lua'), 'utf8')
const TOKEN = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const SLUGGED = /^[\w-]*:[\w-]*$/
const SCAN_COUNT = 500
// How many splits of a syncguard lock key into a client's and syncguard's prefix are tried.
const MAX_READINGS = 16

/**
 * A key of another type than a lock's (WRONGTYPE), or one this ACL user may not read
 * (NOPERM: SCAN names every key), reads as `fallback`; any other refusal (a cluster down)
 * and a lost or silent connection still fail the command.
 */
function orElse(fallback) {
  return (err) => {
    if (err instanceof ReplyError && /^(WRONGTYPE|NOPERM)\b/.test(err.message)) return fallback
    throw err
  }
}

/** A holder's token or lockId cut short: enough to tell holders apart, not to act as one. */
function shorten(text) {
  return text.length > 8 ? `${text.slice(0, 8)}…` : text
}

function syncguardRecord(value) {
  if (value[0] !== 0x7b) return null
  try {
    const record = JSON.parse(value.toString('utf8'))
    const fields = ['lockId', 'expiresAtMs', 'acquiredAtMs', 'key', 'fence']
    return record && typeof record === 'object' && fields.every((f) => f in record) ? record : null
  } catch {
    return null
  }
}

/**
 * The readings of syncguard's lock key `lockKey` (a Buffer) whose record is `record`: the
 * split of its prefix into an ioredis client's keyPrefix and syncguard's, and the fence and
 * index keys each names, as the library writes them (the client's prefix in front of
 * syncguard's names; on a cluster with an untagged prefix, in the lock key's slot: native
 * syncguardClusterKey). Where the client's prefix ends is not written anywhere, so every
 * end just after a ':' is a reading, up to MAX_READINGS, '' (no client prefix) first; only
 * those that name this lock key are kept.
 */
function syncguardReadings(lockKey, record, cluster) {
  const text = lockKey.toString('utf8')
  const ends = [0]
  for (let at = text.indexOf(':'); at >= 0; at = text.indexOf(':', at + 1)) ends.push(at + 1)
  const readings = []
  for (const end of ends) {
    if (readings.length === MAX_READINGS) break
    const clientPrefix = text.slice(0, end)
    const prefix = prefixOf(text.slice(end), record.key)
    const named = namesOf(prefix, record)
    if (!named || clientPrefix + named.lockKey !== text) continue
    const at = cluster
      ? (name) => native.syncguardClusterKey(Buffer.from(clientPrefix), Buffer.from(prefix), lockKey, Buffer.from(name))
      : (name) => Buffer.from(clientPrefix + name)
    readings.push({ fence: at(named.fence), index: at(named.index) })
  }
  return readings
}

/** syncguard's names of `record`'s keys under `prefix`, or null where it names none. */
function namesOf(prefix, record) {
  try {
    const lockKey = lockKeyOf(prefix, record.key)
    return { lockKey, fence: fenceKeyOf(prefix, lockKey), index: indexKeyOf(prefix, record.lockId) }
  } catch {
    // A prefix too long for syncguard's key limit, or a record whose key is no key.
    return null
  }
}

/** syncguard's prefix of `lockKey`, read back from the user key its record names. */
function prefixOf(lockKey, key) {
  if (lockKey === key) return ''
  if (lockKey.endsWith(`:${key}`)) return lockKey.slice(0, -key.length - 1)
  // A hashed key: `<prefix>:<digest>`.
  return lockKey.slice(0, Math.max(0, lockKey.lastIndexOf(':')))
}

/**
 * Which of our APIs wrote a lock. Redis does not record it, so it is read from the layout:
 * ExclusiveLock's owner key or its `<slug>:<slug>` key with contents that are no token,
 * DistributedLock's default `lock:` prefix; the rest is maestro's verbatim key.
 */
function apiOf(key, value, hasOwner) {
  const text = key.toString('utf8')
  const token = TOKEN.test(value.toString('latin1'))
  if (hasOwner || (!token && SLUGGED.test(text))) return 'exclusive-lock'
  return token && text.startsWith('lock:') ? 'distributed-lock' : 'maestro'
}

/**
 * Reads the locks among `keys` (Buffers): one pipelined round of GETs, then one of the
 * siblings of those that hold a value. Keys that are no lock of ours are left out.
 */
async function readLocks(client, keys, { full = false } = {}) {
  const candidates = keys.filter((key) => !native.isSiblingKey(key))
  const values = await Promise.all(candidates.map((key) => client.call('GET', key).catch(orElse(null))))
  const reads = candidates.map(async (key, i) => {
    const value = values[i]
    if (!Buffer.isBuffer(value)) return null
    const record = syncguardRecord(value)
    if (record) return readSyncguard(client, key, value, record, full)
    return readOurs(client, key, value, full)
  })
  return (await Promise.all(reads)).filter(Boolean)
}

async function readSyncguard(client, key, value, record, full) {
  const readings = syncguardReadings(key, record, typeof client.masters === 'function')
  if (readings.length === 0) return null
  // Every reading's keys in one round with the lock's TTL: the reading whose index and fence
  // exist is the library's (on one Redis the index key is the same in every reading).
  // Waiters of ours (createLock, lock(fn)) queue in the lock key's own wake queue, as
  // DistributedLock's do: the core names it from the lock key, whatever syncguard's prefix.
  const waiting = native.lockSiblings(key).waiting
  const [ttl, queued, ...found] = await Promise.all([
    client.call('PTTL', key),
    client.call('ZCARD', waiting).catch(orElse(0)),
    ...readings.map(({ fence, index }) => Promise.all([
      client.call('GET', fence).catch(orElse(null)),
      client.call('EXISTS', index).catch(orElse(0)),
    ])),
  ])
  const score = ([counter, indexed]) => (counter ? 1 : 0) + indexed
  const best = found.reduce((at, seen, i) => (score(seen) > score(found[at]) ? i : at), 0)
  const keys = readings[best]
  const [counter, indexed] = found[best]
  const lock = {
    key: key.toString('utf8'),
    api: 'syncguard',
    holder: shorten(String(record.lockId)),
    ttlMs: ttl >= 0 ? ttl : null,
    fence: record.fence,
    fenceCounter: counter ? counter.toString() : null,
    waiters: queued,
    contents: { key: record.key, acquiredAtMs: record.acquiredAtMs, expiresAtMs: record.expiresAtMs },
  }
  counters(lock, keys.fence, [waiting])
  if (full) {
    lock.queue = queueOf(await client.call('ZRANGE', waiting, 0, -1, 'WITHSCORES').catch(orElse([])))
    lock.keys = { fence: keys.fence.toString('latin1'), index: indexed ? keys.index.toString('utf8') : null }
    lock.forget = { value, fence: keys.fence, others: [keys.index], step: 1 }
  }
  return lock
}

async function readOurs(client, key, value, full) {
  const sib = native.lockSiblings(key)
  const [hasFence, owner, ttl, counter, queued, lined, ring] = await Promise.all([
    client.call('EXISTS', sib.fence),
    // ExclusiveLock's holder is its owner key's token (its lock key holds lock_contents).
    client.call('GET', sib.owner).catch(orElse(null)),
    client.call('PTTL', key),
    client.call('GET', sib.fence).catch(orElse(null)),
    client.call('ZCARD', sib.waiting).catch(orElse(0)),
    client.call('ZCARD', sib.line).catch(orElse(0)),
    client.call('LLEN', sib.ring).catch(orElse(0)),
  ])
  // Every acquisition of ours draws from the counter: no counter, no lock of ours.
  if (!hasFence) return null
  const api = apiOf(key, value, owner !== null)
  const holder = api === 'exclusive-lock' ? owner : value
  const lock = {
    key: key.toString('utf8'),
    api,
    holder: holder ? shorten(holder.toString('utf8')) : null,
    ttlMs: ttl >= 0 ? ttl : null,
    fence: null,
    fenceCounter: counter ? counter.toString() : null,
    waiters: queued + lined,
    contents: api === 'exclusive-lock' ? { lock_contents: value.toString('utf8') } : null,
  }
  counters(lock, sib.fence, [sib.waiting, sib.line], sib.ring, ring, sib.missed)
  if (full) {
    const [waiting, line] = await Promise.all([
      client.call('ZRANGE', sib.waiting, 0, -1, 'WITHSCORES').catch(orElse([])),
      client.call('ZRANGE', sib.line, 0, -1, 'WITHSCORES').catch(orElse([])),
    ])
    lock.queue = queueOf(waiting)
    lock.line = pairs(line).map(([waiter, since]) => ({ waiter: shorten(waiter), since: Number(since) }))
    lock.keys = { fence: sib.fence.toString('latin1'), channel: sib.channel.toString('latin1') }
    lock.forget = { value, fence: sib.fence, others: [sib.owner], step: 2 }
  }
  return lock
}

/**
 * Where a lock's fence counter, queues, grant ring and count of fences drawn in vain
 * (`missed`, none for syncguard's, which draws only when it wins) are, and how many
 * connections its ring held (`ringed`), kept out of its JSON: `watch` reads them on.
 */
function counters(lock, fence, queues, ring = null, ringed = 0, missed = null) {
  Object.defineProperty(lock, 'counters', { value: { fence, queues, ring, ringed, missed }, enumerable: false })
}

/**
 * A lock seen held before, read again while it may be free: its fence counter and waiters
 * (`watch` keeps a contended lock's row through the instants it is free).
 */
async function rereadCounters(client, lock) {
  const { fence, queues, ring, missed } = lock.counters
  const [counter, ringed, ...sizes] = await Promise.all([
    client.call('GET', fence).catch(orElse(null)),
    ring === null ? 0 : client.call('LLEN', ring).catch(orElse(0)),
    ...queues.map((queue) => client.call('ZCARD', queue).catch(orElse(0))),
  ])
  const again = { ...lock, holder: null, ttlMs: null, fence: null, contents: null,
    fenceCounter: counter ? counter.toString() : null, waiters: sizes.reduce((a, b) => a + b, 0) }
  counters(again, fence, queues, ring, ringed, missed)
  return again
}

/**
 * How many fences each of `locks` had drawn for no acquisition (0 where none were, or it
 * keeps no count): a transaction that found its lock held drew two all the same, and its
 * process counts them beside the counter as it reads the reply (count_missed.lua).
 */
async function readMissed(client, locks) {
  return Promise.all(locks.map(async (lock) => {
    const key = lock.counters?.missed
    if (!key) return 0
    const count = await client.call('GET', key).catch(orElse(null))
    return count ? Number(count.toString()) : 0
  }))
}

/** A wake queue's ZRANGE WITHSCORES: the connections queued, and since when (ms). */
function queueOf(flat) {
  return pairs(flat).map(([connection, since]) => ({ connection, since: Number(since) }))
}

function pairs(flat) {
  const out = []
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i].toString('utf8'), flat[i + 1].toString()])
  return out
}

/**
 * Every lock whose key matches `pattern`, a page of SCAN at a time: on a cluster, of every
 * master, each key read through `client`, which sends it to its slot's master.
 */
async function listLocks(client, pattern) {
  const found = new Map()
  for (const server of client.masters ? await client.masters() : [client]) {
    let cursor = '0'
    do {
      const [next, keys] = await server.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT)
      cursor = next.toString()
      // A key of a slot being moved can show on both masters: listed once.
      for (const lock of await readLocks(client, keys)) found.set(lock.key, lock)
    } while (cursor !== '0')
  }
  return [...found.values()].sort((a, b) => b.waiters - a.waiters || a.key.localeCompare(b.key))
}

/** One lock in full, or null when `key` holds no lock of ours. */
async function inspectLock(client, key) {
  const [lock] = await readLocks(client, [Buffer.from(key, 'utf8')], { full: true })
  return lock ?? null
}

/**
 * Deletes the lock `lock` (from inspectLock) if it has not changed hands, and moves its fence
 * counter on: `{ deletedKeys, fenceCounter }` (how many keys were deleted, and the counter
 * after, or null when there was none), or null when the lock changed hands.
 */
async function forceRelease(client, lock) {
  const { value, fence, others, step } = lock.forget
  const keys = [Buffer.from(lock.key, 'utf8'), fence, ...others]
  const reply = await client.call('EVAL', FORCE_RELEASE, keys.length, ...keys, value, step)
  if (reply[0] !== 1) return null
  return { deletedKeys: reply[1], fenceCounter: reply[2] === null ? null : String(reply[2]) }
}

module.exports = { listLocks, inspectLock, forceRelease, rereadCounters, readMissed }
