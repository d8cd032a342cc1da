'use strict'

// ExclusiveLock's acquire() and release() on the JS-thread connection (src/binding/js/socket):
// once it is open they go there, the acquire as one transaction (proto/acquire.rs) and
// the release as the same script as through tokio; what it cannot finish (a connection killed
// under the call, NOSCRIPT, another Redis error, a silent server) ends exactly as through
// tokio. A transaction writes the lock key only: it is known ours by the expiry the
// transaction read, until the first refresh writes the owner key beside it on one new expiry.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const direct = require('./helpers/direct')
const { siblingKey } = require('./helpers/keys')
const ExclusiveLock = require('../exclusive-lock')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let server
let admin
const locks = new Set()

before(async () => {
  server = await startRedis()
  admin = new Redis(server.port, { lazyConnect: true })
  await admin.connect()
  await admin.client('SETNAME', 'test-admin')
})

after(async () => {
  await Promise.all([...locks].map((lock) => lock.release().catch(() => {})))
  admin?.disconnect()
  await server?.close()
  assert.deepEqual(unhandled, [])
})

function make(name, opts) {
  const lock = new ExclusiveLock({ name, cache_connection: server.url, ...opts })
  lock.on('error', () => {})
  locks.add(lock)
  return lock
}

/** Made with the JS-thread connection turned off: every call goes through tokio. */
function makeTokioOnly(name) {
  const saved = process.env.NATIVE_REDIS_LOCK_DIRECT
  process.env.NATIVE_REDIS_LOCK_DIRECT = '0'
  try {
    return make(name)
  } finally {
    if (saved === undefined) delete process.env.NATIVE_REDIS_LOCK_DIRECT
    else process.env.NATIVE_REDIS_LOCK_DIRECT = saved
  }
}

/** Takes and frees `lock` until the JS-thread connection is open (it opens on first use). */
async function withDirect(lock) {
  // The connection shows in CLIENT LIST before calls go over it, and its first attempt is the
  // script behind an empty MULTI EXEC (which shows transactions work there): wait until an
  // acquire was a transaction, known by the owner key it leaves unwritten (the script and the
  // runtime's path write one).
  for (let tries = 0; tries < 200; tries++) {
    assert.equal(await lock.acquire(), true)
    const owned = await admin.exists(siblingKey(lock.key, 'owner'))
    await lock.release()
    if (owned === 0 && (await direct.directConnections(admin)).length > 0) return
    await sleep(10)
  }
  throw new Error('no acquire went over the JS-thread connection as a transaction')
}

const calls = (info, command) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0)

test('acquire() goes over the JS-thread connection as one transaction, and release() as the script', async () => {
  const lock = make('direct-used')
  await withDirect(lock)
  const [id] = await direct.directConnections(admin)
  const addr = /addr=(\S+)/.exec((await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `)))[1]
  const monitor = await admin.duplicate().monitor()
  const seen = []
  monitor.on('monitor', (_time, args, source) => seen.push({ args, source }))
  let before
  let after
  let lockAt
  try {
    before = await admin.info('commandstats')
    assert.equal(await lock.acquire(), true)
    assert.equal(await admin.get(lock.key), '1')
    // No owner key: a hold this short never has one.
    assert.equal(await admin.exists(siblingKey(lock.key, 'owner')), 0)
    let line = (await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `))
    assert.match(line, /cmd=exec/)
    lockAt = await admin.pexpiretime(lock.key)
    assert.ok(lockAt > Date.now())
    assert.equal(lock.fence, String((await admin.get(siblingKey(lock.key, 'fence'))) - 1).padStart(15, '0'))
    await lock.release()
    assert.equal(await admin.exists(lock.key), 0)
    assert.equal(await admin.exists(siblingKey(lock.key, 'owner')), 0)
    after = await admin.info('commandstats')
    line = (await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `))
    assert.match(line, /cmd=evalsha/)
    // One transaction, then one script, nothing else: no SCRIPT LOAD, no follow-up.
    assert.equal(calls(after, 'exec') - calls(before, 'exec'), 1)
    assert.equal(calls(after, 'evalsha') - calls(before, 'evalsha'), 1)
    assert.equal(calls(after, 'script|load') - calls(before, 'script|load'), 0)
    await sleep(50)
  } finally {
    monitor.disconnect()
  }
  // The admin's own reads aside: every command on the lock's keys came from that connection.
  const ours = seen.filter(({ source }) => source === addr)
  // No PEXPIRE of the counter: withDirect's transaction pushed it, and the connection knows
  // it is kept past this lock (README, "Fencing tokens"; fence-retention.test.js).
  assert.deepEqual(ours.map(({ args }) => args[0].toUpperCase()), ['MULTI', 'SET', 'INCRBY', 'PEXPIRETIME', 'EXEC', 'EVALSHA'])
  const sets = ours.filter(({ args }) => /^set$/i.test(args[0]))
  assert.equal(sets.length, 1, JSON.stringify(seen))
  assert.deepEqual([sets[0].args[1], sets[0].args[2]], [lock.key, '1'])
  assert.ok(sets[0].args.some((a) => /^nx$/i.test(a)), JSON.stringify(sets[0].args))
  // The release: the script with the owner key, the value and the expiry read (2 keys).
  assert.equal(seen.filter(({ args, source }) => source !== addr && /^(set|evalsha|multi)$/i.test(args[0])).length, 0)
  const scripts = ours.filter(({ args }) => /^evalsha$/i.test(args[0]))
  assert.equal(scripts.length, 1, JSON.stringify(seen))
  assert.equal(scripts[0].args[2], '2')
  assert.deepEqual(scripts[0].args.slice(-2), ['1', String(lockAt)])
})

test('a transaction that loses writes nothing: not beside their lock, nor beside one of ours', async () => {
  const lock = make('direct-lost')
  await withDirect(lock)
  await admin.set(lock.key, 'theirs', 'PX', 5000)
  assert.equal(await lock.acquire(), false)
  assert.equal(await admin.exists(siblingKey(lock.key, 'owner')), 0)
  assert.equal(await admin.get(lock.key), 'theirs')
  // Held by one of ours, refreshed (so with its owner key): nothing of the holder's is touched.
  await admin.del(lock.key)
  const holder = make('direct-lost', { lock_ttl_ms: 1500, lock_refresh_ms: 100 })
  assert.equal(await holder.acquire(), true)
  await new Promise((resolve) => holder.once('refreshed', resolve))
  const token = await admin.get(siblingKey(lock.key, 'owner'))
  assert.match(token, /^[0-9a-f-]{36}$/)
  assert.equal(await lock.acquire(), false)
  assert.equal(await admin.get(siblingKey(lock.key, 'owner')), token)
  await holder.release()
  assert.equal(await admin.exists(lock.key, siblingKey(lock.key, 'owner')), 0)
})

test("an owner key left behind: the transaction's lock is ours by its expiry, and its first refresh makes the owner key ours", async () => {
  const lock = make('direct-left-behind', { lock_ttl_ms: 1500, lock_refresh_ms: 500 })
  await withDirect(lock)
  const owner = siblingKey(lock.key, 'owner')
  await admin.set(owner, 'left-behind', 'PX', 60_000)
  assert.equal(await lock.acquire(), true)
  assert.match(lock.fence, /^\d{15}$/)
  // Until the first refresh the owner key is what it was; the lock key's expiry proves ours.
  assert.equal(await admin.get(owner), 'left-behind')
  const refreshed = new Promise((resolve) => lock.once('refreshed', resolve))
  await refreshed
  const token = await admin.get(owner)
  assert.match(token, /^[0-9a-f-]{36}$/)
  assert.equal(await admin.pexpiretime(owner), await admin.pexpiretime(lock.key))
  await sleep(600)
  assert.equal(lock.acquired, true, 'a refresh after the first one lost the lock')
  assert.equal(await admin.get(owner), token)
  await lock.release()
  assert.equal(await admin.exists(lock.key), 0)
  assert.equal(await admin.exists(owner), 0)
  // Released before any refresh: both keys go, the stale owner key too.
  await admin.set(owner, 'left-behind', 'PX', 60_000)
  assert.equal(await lock.acquire(), true)
  await lock.release()
  assert.equal(await admin.exists(lock.key, owner), 0)
})

test('a lock key re-created by another client is not ours by the expiry our transaction read', async () => {
  // The release script itself, as a late or lost transaction's undo runs it: a lock key whose
  // value or expiry differs from what the transaction read is someone else's.
  const lock = make('direct-recreated')
  const owner = siblingKey(lock.key, 'owner')
  await admin.set(lock.key, '1', 'PX', 5000)
  const expiry = await admin.pexpiretime(lock.key)
  const scripts = require('node:path').join(__dirname, '../src/core/proto/scripts')
  const read = (name) => require('node:fs').readFileSync(require('node:path').join(scripts, name), 'utf8')
  const release = read('same_expiry.lua') + read('release.lua')
  assert.equal(await admin.eval(release, 2, owner, lock.key, 'ours-token', '1', expiry + 7), 0)
  assert.equal(await admin.eval(release, 2, owner, lock.key, 'ours-token', '2', expiry), 0)
  assert.equal(await admin.eval(release, 2, owner, lock.key, 'ours-token', '1', ''), 0)
  assert.equal(await admin.get(lock.key), '1')
  // Our owner key beside a lock not ours is ours to delete.
  await admin.set(owner, 'ours-token', 'PX', 9000)
  assert.equal(await admin.eval(release, 2, owner, lock.key, 'ours-token', '1', expiry + 7), 0)
  assert.equal(await admin.exists(owner), 0)
  assert.equal(await admin.eval(release, 2, owner, lock.key, 'ours-token', '1', expiry), 1)
  assert.equal(await admin.exists(lock.key), 0)
})

test('a connection killed under acquires in flight: each resolves, none wrongly, and what was lost expires', async () => {
  const holder = make('direct-killed-held')
  await withDirect(holder)
  assert.equal(await holder.acquire(), true)
  const [id] = await direct.directConnections(admin)
  const winners = Array.from({ length: 200 }, (_, i) => make(`direct-killed-${i}`, { lock_ttl_ms: 1500, lock_refresh_ms: 500 }))
  const loser = make('direct-killed-held')
  const acquiring = winners.map((lock) => lock.acquire())
  const losing = loser.acquire()
  await admin.client('KILL', 'ID', id)
  const outcomes = await Promise.all(acquiring)
  assert.equal(await losing, false)
  // A transaction whose reply the kill took may have won: a fresh attempt is made, which
  // then finds that lock key held until its TTL. Never two holders; every winner releases.
  for (const [i, won] of outcomes.entries()) {
    const lock = winners[i]
    assert.equal(lock.acquired, won)
    if (!won) continue
    assert.match(lock.fence, /^\d{15}$/)
    assert.equal(await admin.get(lock.key), '1')
  }
  // The holder's lock was never touched by the loser's attempt, sent once or twice.
  assert.equal(holder.acquired, true)
  assert.equal(await admin.get(holder.key), '1')
  await Promise.all(winners.map((lock) => lock.release()))
  for (const [i, won] of outcomes.entries()) {
    if (won) assert.equal(await admin.exists(winners[i].key), 0, 'a winner\'s release left its lock')
  }
  await holder.release()
  // What no one holds expires by its TTL.
  await sleep(1600)
  assert.deepEqual(await admin.keys('exclusive-lock:direct-killed*'), [])
  assert.ok((await direct.directConnections(admin)).length <= 1)
})

test('release() while acquire() is in flight still wins, the connection killed or not', async () => {
  const lock = make('direct-released-in-flight')
  await withDirect(lock)
  for (const kill of [false, true]) {
    const events = []
    lock.on('acquired', () => events.push('acquired'))
    const [id] = await direct.directConnections(admin)
    const acquiring = lock.acquire()
    const releasing = lock.release()
    if (kill) await admin.client('KILL', 'ID', id)
    assert.equal(await acquiring, false)
    await releasing
    assert.equal(lock.acquired, false)
    assert.deepEqual(events, [])
    assert.equal(await admin.exists(lock.key), 0)
    lock.removeAllListeners('acquired')
    await withDirect(lock)
  }
})

test('Redis errors and NOSCRIPT end as through tokio', async () => {
  const lock = make('direct-errors')
  const tokio = makeTokioOnly('direct-errors-tokio')
  await withDirect(lock)
  // OOM: the same rejection either way.
  await admin.config('SET', 'maxmemory', '1')
  let ours
  let theirs
  try {
    ours = await lock.acquire().catch((err) => err)
    theirs = await tokio.acquire().catch((err) => err)
  } finally {
    await admin.config('SET', 'maxmemory', '0')
  }
  assert.ok(ours instanceof Error, String(ours))
  assert.equal(ours.constructor, theirs.constructor)
  assert.equal(ours.code, theirs.code)
  assert.equal(ours.message.replace('direct-errors-tokio', 'direct-errors'), theirs.message.replace('direct-errors-tokio', 'direct-errors'))
  assert.equal(lock.acquired, false)
  // The scripts flushed under a hold and before the next: both still work.
  assert.equal(await lock.acquire(), true)
  // Still a transaction (no owner key): an OOM refusal inside one is not a refusal of MULTI.
  assert.equal(await admin.exists(siblingKey(lock.key, 'owner')), 0)
  await admin.script('FLUSH')
  await lock.release()
  assert.equal(await admin.exists(lock.key), 0)
  await admin.script('FLUSH')
  assert.equal(await lock.acquire(), true)
  assert.equal(await admin.get(lock.key), '1')
  await lock.release()
  assert.equal(await admin.exists(lock.key), 0)
  // Held by someone else (another client, the original's way): false, their lock untouched.
  await admin.set(lock.key, 'theirs', 'PX', 5000)
  assert.equal(await lock.acquire(), false)
  assert.equal(await admin.get(lock.key), 'theirs')
  await admin.del(lock.key)
})

test('a silent server: acquire() ends at its bound, and a lock won meanwhile is freed', async () => {
  const lock = make('direct-silent')
  await withDirect(lock)
  server.pause()
  let failure
  const started = performance.now()
  try {
    await lock.acquire()
  } catch (err) {
    failure = err
  } finally {
    setTimeout(() => server.resume(), 300)
  }
  const elapsed = performance.now() - started
  assert.equal(failure?.code, 'ETIMEDOUT', String(failure))
  assert.ok(elapsed < 6000, `told after ${elapsed.toFixed(0)} ms`)
  assert.equal(lock.acquired, false)
  // The attempt ran once Redis resumed; nobody holds it, so it must not stay locked.
  let exists = 1
  for (let tries = 0; tries < 100 && exists; tries++) {
    await sleep(20)
    exists = await admin.exists(lock.key)
  }
  assert.equal(exists, 0, 'the late grant was not freed')
  assert.equal(await lock.acquire(), true)
  await lock.release()
})
