'use strict'

// ExclusiveLock against the ORIGINAL @logdna/exclusive-lock 2.x protocol on the same Redis, as
// in a fleet half-migrated: an in-test emulation of the original's commands (over its own
// ioredis client) contends with ours for the same names. The original has no owner token:
// acquire = SET key contents PX ttl NX, refresh = unconditional PEXPIRE key ttl,
// release = unconditional DEL key, inspect = MULTI GET key PTTL key EXEC.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const ExclusiveLock = require('../exclusive-lock')
const { LockLostError } = require('..')
const { ownerKey } = require('./helpers/keys')

const MARGIN = 400
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const slug = (text) => text.replace(/[\s\W]+/g, '-')

let server
let raw // our own look at Redis
const clients = new Set()
const locks = new Set()
const originals = new Set()

/** The original's Redis protocol, command for command. */
class OriginalLock {
  constructor(client, { name, lock_ttl_ms = 3000, lock_refresh_ms = 1000, lock_contents = '1', key_prefix = 'exclusive-lock' }) {
    this.client = client
    this.key = `${slug(key_prefix)}:${slug(name)}`
    this.lock_ttl_ms = lock_ttl_ms
    this.lock_refresh_ms = lock_refresh_ms
    this.lock_contents = lock_contents
    this.acquired = false
    this.refresh_timer = null
    originals.add(this)
  }

  async acquire() {
    if (this.acquired) return true
    const ok = await this.client.set(this.key, this.lock_contents, 'PX', this.lock_ttl_ms, 'NX')
    if (ok !== 'OK') return false
    this.acquired = true
    this.refresh_timer = setInterval(() => {
      this.client.pexpire(this.key, this.lock_ttl_ms).catch(() => {})
    }, this.lock_refresh_ms)
    return true
  }

  async release() {
    if (!this.acquired) return
    clearInterval(this.refresh_timer)
    this.refresh_timer = null
    try {
      await this.client.del(this.key)
    } finally {
      this.acquired = false
    }
  }

  /** Stops refreshing without deleting: the original's process died. */
  die() {
    clearInterval(this.refresh_timer)
    this.refresh_timer = null
    this.acquired = false
  }

  async inspect() {
    const [[getErr, contents], [ttlErr, ttl]] = await this.client.multi().get(this.key).pttl(this.key).exec()
    if (getErr) throw getErr
    if (ttlErr) throw ttlErr
    if (contents === null) return null
    return { lock_ttl_ms: ttl, lock_contents: contents }
  }
}

function newClient(options = {}) {
  const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1, ...options })
  clients.add(client)
  return client
}

function make(opts) {
  const lock = new ExclusiveLock({ cache_connection: server.url, ...opts })
  locks.add(lock)
  return lock
}

function record(lock) {
  const events = []
  for (const type of ['acquired', 'refreshed', 'released', 'error']) {
    lock.on(type, (...args) => events.push({ type, args, at: performance.now() }))
  }
  return events
}

const ofType = (events, type) => events.filter((e) => e.type === type)

async function waitFor(predicate, timeoutMs, what) {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    if (await predicate()) return
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(10)
  }
}

const pexpiretime = (key) => raw.call('PEXPIRETIME', key)

before(async () => {
  server = await startRedis()
  raw = newClient()
})

after(async () => {
  for (const original of originals) original.die()
  for (const lock of locks) {
    lock.removeAllListeners('error')
    lock.on('error', () => {})
    await lock.release().catch(() => {})
  }
  for (const client of clients) client.disconnect()
  if (server) await server.close()
})

describe('contention with the original protocol', () => {
  test('while ours holds, the original SET NX fails; the original reads our lock as its own format', async () => {
    const original = new OriginalLock(newClient(), { name: 'compat a1' })
    const ours = make({ name: 'compat a1', lock_contents: 'pod-ours', lock_ttl_ms: 2000, lock_refresh_ms: 500 })
    assert.equal(ours.key, original.key)
    assert.equal(await ours.acquire(), true)
    for (let i = 0; i < 3; i++) {
      assert.equal(await original.acquire(), false)
      await sleep(300) // across our refreshes too
    }
    assert.equal(original.acquired, false)
    assert.equal(await raw.get(ours.key), 'pod-ours')
    await ours.release()
    assert.equal(await original.acquire(), true, 'free once ours released')
    await original.release()
  })

  test('while the original holds (and keeps PEXPIRE-ing), ours acquire() is false; after its DEL ours wins', async () => {
    const original = new OriginalLock(newClient(), {
      name: 'compat a2',
      lock_contents: 'pod-original',
      lock_ttl_ms: 1000,
      lock_refresh_ms: 300,
    })
    const ours = make({ name: 'compat a2' })
    const events = record(ours)
    assert.equal(await original.acquire(), true)
    const started = performance.now()
    while (performance.now() - started < 1500) {
      // longer than the original's TTL: only its refresh keeps it
      assert.equal(await ours.acquire(), false)
      assert.equal(ours.acquired, false)
      await sleep(100)
    }
    assert.deepEqual(events, [])
    const seen = await ours.inspect()
    assert.equal(seen.lock_contents, 'pod-original')
    assert.ok(seen.lock_ttl_ms > 0 && seen.lock_ttl_ms <= 1000)
    assert.equal(ours.fence, null)
    await original.release()
    assert.equal(await ours.acquire(), true)
    assert.equal(await raw.get(ours.key), '1')
    await ours.release()
    assert.equal(await raw.exists(ours.key), 0)
  })

  test('a dead original holder (no DEL) blocks ours until its TTL runs out, not longer', async () => {
    const original = new OriginalLock(newClient(), { name: 'compat dead', lock_ttl_ms: 800, lock_refresh_ms: 200 })
    const ours = make({ name: 'compat dead' })
    assert.equal(await original.acquire(), true)
    await sleep(300)
    original.die()
    const diedAt = performance.now()
    let won = false
    while (!won && performance.now() - diedAt < 800 + 2 * MARGIN) {
      won = await ours.acquire()
      if (!won) await sleep(20)
    }
    assert.equal(won, true)
    const waited = performance.now() - diedAt
    assert.ok(waited >= 800 - 250, `won ${Math.round(waited)} ms after the original died (ttl 800)`)
    await ours.release()
  })

  test('alternating contention for ~3 s, one original and one of ours: never both holding', async (t) => {
    const original = new OriginalLock(newClient(), { name: 'compat loop', lock_contents: 'orig' })
    const ours = make({ name: 'compat loop', lock_contents: 'ours' })
    const events = record(ours)
    const state = { original: false, ours: false }
    const wins = { original: 0, ours: 0 }
    const overlaps = []
    const end = performance.now() + 3000

    async function run(who, lock) {
      const other = who === 'ours' ? 'original' : 'ours'
      while (performance.now() < end) {
        if (await lock.acquire()) {
          if (state[other]) overlaps.push(`${who} acquired while ${other} held (${wins[who]})`)
          state[who] = true
          wins[who]++
          // What Redis holds is the holder's contents.
          const value = await raw.get(lock.key)
          if (value !== (who === 'ours' ? 'ours' : 'orig')) overlaps.push(`${who} holds but the key says ${value}`)
          await sleep(Math.random() * 15)
          if (state[other]) overlaps.push(`${other} acquired while ${who} held`)
          state[who] = false
          await lock.release()
        }
        await sleep(Math.random() * 6)
      }
    }

    await Promise.all([run('original', original), run('ours', ours)])
    t.diagnostic(`wins: original ${wins.original}, ours ${wins.ours}`)
    assert.deepEqual(overlaps, [])
    assert.ok(wins.original >= 5, `original won ${wins.original} times`)
    assert.ok(wins.ours >= 5, `ours won ${wins.ours} times`)
    assert.deepEqual(ofType(events, 'error'), [], 'no spurious loss')
    assert.equal(ofType(events, 'acquired').length, wins.ours)
    assert.equal(ofType(events, 'released').length, wins.ours)
    assert.equal(await raw.exists(ours.key, ownerKey(ours.key)), 0, 'both released: nothing left')
  })
})

describe('ours never deletes or extends a lock it does not own', () => {
  test("a late release() after the original took the key leaves the original's key and TTL alone", async () => {
    const original = new OriginalLock(newClient(), { name: 'compat late release', lock_contents: 'orig', lock_ttl_ms: 10000, lock_refresh_ms: 5000 })
    const ours = make({ name: 'compat late release' })
    assert.equal(await ours.acquire(), true)
    await ours.release()
    assert.equal(await original.acquire(), true)
    const at = await pexpiretime(original.key)
    assert.equal(await ours.release(), undefined)
    assert.equal(await ours.release(), undefined)
    assert.equal(await ours.acquire(), false)
    assert.equal(await raw.get(original.key), 'orig')
    assert.equal(await pexpiretime(original.key), at, 'expiry untouched')
    const ttl = await raw.pttl(original.key)
    assert.ok(ttl > 9000 && ttl <= 10000, `PTTL ${ttl}`)
    await original.release()
  })

  /** Ours holds (ttl 2000, refresh 200); then `steal` runs on the original's client. */
  async function stolen(name, steal) {
    const originalClient = newClient()
    const ours = make({ name, lock_ttl_ms: 2000, lock_refresh_ms: 200 })
    const events = record(ours)
    assert.equal(await ours.acquire(), true)
    await waitFor(() => ofType(events, 'refreshed').length >= 2, 2000, 'two refreshes')
    const stolenAt = performance.now()
    await steal(originalClient, ours.key)
    const at = await pexpiretime(ours.key)
    await waitFor(() => ofType(events, 'error').length >= 1, 2000 + MARGIN, 'the loss')
    const error = ofType(events, 'error')[0]
    await waitFor(() => ofType(events, 'released').length >= 1, 3000, 'the automatic release')
    return { ours, events, error, stolenAt, at }
  }

  async function assertLeftAlone({ ours, events, error, stolenAt, at }, contents) {
    const err = error.args[0]
    assert.ok(err instanceof LockLostError, `${err?.name}: ${err?.message}`)
    assert.equal(err.code, 'ELOST')
    assert.equal(err.key, ours.key)
    assert.ok(error.at - stolenAt <= 2 * 200 + MARGIN, `noticed ${Math.round(error.at - stolenAt)} ms after`)
    assert.match(events.map((e) => e.type).join(','), /^acquired(,refreshed)+,error,released$/)
    assert.equal(ours.acquired, false)
    // The thief's key survives our release, with the expiry the thief gave it.
    assert.equal(await raw.get(ours.key), contents)
    assert.equal(await pexpiretime(ours.key), at, 'not extended')
    const ttl1 = await raw.pttl(ours.key)
    await sleep(500)
    const ttl2 = await raw.pttl(ours.key)
    assert.ok(ttl2 <= ttl1 - 400, `PTTL keeps falling (${ttl1} -> ${ttl2})`)
    assert.equal(await raw.get(ours.key), contents, 'still not deleted')
    assert.equal(await raw.exists(ownerKey(ours.key)), 0, 'our owner key is cleaned up')
    assert.equal(await ours.acquire(), false, 'the thief holds it now')
    await raw.del(ours.key)
  }

  test("the original DELs ours and SET NX's it with the SAME contents ('1') and a long TTL: ELOST, left alone", async () => {
    const r = await stolen('compat steal same', (client, key) =>
      client.pipeline().del(key).set(key, '1', 'PX', 10000, 'NX').exec(),
    )
    await assertLeftAlone(r, '1')
  })

  test('the original DELs ours and SET NX\'s it with other contents: ELOST, left alone', async () => {
    const r = await stolen('compat steal other', (client, key) =>
      client.pipeline().del(key).set(key, 'orig-pod', 'PX', 10000, 'NX').exec(),
    )
    await assertLeftAlone(r, 'orig-pod')
  })

  test("a stale original's refresh re-times our key (PEXPIRE): ELOST, and the key is left to that original", async () => {
    const r = await stolen('compat retimed', (client, key) => client.pexpire(key, 10000))
    await assertLeftAlone(r, '1')
  })
})

describe("the original's inspect reads our lock", () => {
  test('MULTI GET PTTL EXEC: our lock_contents and a positive TTL kept near lock_ttl_ms', async () => {
    const original = new OriginalLock(newClient(), { name: 'compat inspect' })
    const ours = make({ name: 'compat inspect', lock_contents: 'worker-42', lock_ttl_ms: 1500, lock_refresh_ms: 300 })
    assert.equal(await original.inspect(), null)
    await ours.acquire()
    const first = await original.inspect()
    assert.deepEqual(Object.keys(first).sort(), ['lock_contents', 'lock_ttl_ms'])
    assert.equal(first.lock_contents, 'worker-42')
    assert.ok(first.lock_ttl_ms > 1000 && first.lock_ttl_ms <= 1500, `ttl ${first.lock_ttl_ms}`)
    await sleep(2000) // longer than the TTL: our refresh keeps it
    const later = await original.inspect()
    assert.equal(later.lock_contents, 'worker-42')
    assert.ok(later.lock_ttl_ms > 1500 - 300 - MARGIN && later.lock_ttl_ms <= 1500, `ttl ${later.lock_ttl_ms}`)
    const mine = await ours.inspect()
    assert.equal(mine.lock_contents, later.lock_contents, 'ours and the original read the same')
    assert.ok(mine.lock_ttl_ms > 0)
    await ours.release()
    assert.equal(await original.inspect(), null)
  })
})

describe('ioredis keyPrefix, shared by both', () => {
  test('the same prefixed client given to both: they contend for app:exclusive-lock:<name>', async () => {
    const prefixed = newClient({ keyPrefix: 'app:' })
    const original = new OriginalLock(prefixed, { name: 'compat prefixed', lock_contents: 'orig' })
    const ours = make({ name: 'compat prefixed', cache_connection: prefixed })
    assert.equal(await ours.acquire(), true)
    assert.equal(await raw.get('app:exclusive-lock:compat-prefixed'), '1')
    assert.equal(await original.acquire(), false)
    const seen = await original.inspect()
    assert.equal(seen.lock_contents, '1')
    assert.ok(seen.lock_ttl_ms > 2000 && seen.lock_ttl_ms <= 3000, `ttl ${seen.lock_ttl_ms}`)
    await ours.release()
    assert.equal(await original.acquire(), true)
    assert.equal(await raw.get('app:exclusive-lock:compat-prefixed'), 'orig')
    assert.equal(await ours.acquire(), false)
    assert.equal((await ours.inspect()).lock_contents, 'orig')
    await original.release()
    assert.equal(await raw.exists('app:exclusive-lock:compat-prefixed'), 0)
  })
})

test('an OS process speaking the original protocol and ours never hold at once', async () => {
  const { spawn } = require('node:child_process')
  const path = require('node:path')
  const ExclusiveLock = require('../exclusive-lock')
  const Redis = require('ioredis')
  const name = 'cross-process'
  const key = `exclusive-lock:${name}`
  const durationMs = 3000
  const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'exclusive-original.js')], {
    env: { ...process.env, REDIS_URL: server.url, LOCK_KEY: key, DURATION_MS: String(durationMs) },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let output = ''
  child.stdout.on('data', (chunk) => (output += chunk))
  const exited = new Promise((resolve) => child.once('exit', resolve))

  const redis = new Redis(server.url)
  const ours = new ExclusiveLock({ name, cache_connection: server.url, lock_ttl_ms: 1000, lock_refresh_ms: 300 })
  ours.on('error', () => {})
  let wins = 0
  let violations = 0
  const end = Date.now() + durationMs
  while (Date.now() < end) {
    if (!(await ours.acquire())) {
      await new Promise((resolve) => setTimeout(resolve, 1))
      continue
    }
    wins++
    if ((await redis.incr(`${key}:inside`)) !== 1) violations++
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 3))
    await redis.decr(`${key}:inside`)
    await ours.release()
  }
  assert.equal(await exited, 0)
  redis.disconnect()
  const theirs = JSON.parse(output)
  assert.equal(violations, 0, 'ours saw the original inside')
  assert.equal(theirs.violations, 0, 'the original saw ours inside')
  assert.ok(wins > 20 && theirs.wins > 20, `both must win often: ours ${wins}, original ${theirs.wins}`)
  assert.ok(theirs.inspected > 0, "the original's MULTI GET PTTL saw held locks")
})
