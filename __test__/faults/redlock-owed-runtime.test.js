'use strict'

// The runtime's own Redlock frees (NATIVE_REDIS_LOCK_DIRECT=0: no JS-thread sockets) that a
// node did not answer: a release, and a failed acquisition's undo. The node may keep our token
// (src/core/backend/redlock_owed.rs): it is owed the free, sent once it answers again, so its
// key goes well before its TTL; a free owed never takes a later holder's key (the scripts check
// the token). 5 private redis-servers, node 4 behind a proxy that stops moving bytes and then
// resets its connections, so that the free never reaches the node; checked on each node with a
// raw client. Servers stopped by pid.
process.env.NATIVE_REDIS_LOCK_DIRECT = '0'
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startProxiedNodes, until, sleep } = require('../helpers/proxied-nodes')
const { DistributedLock } = require('../..')

// Long enough that a node's copy expiring on its own cannot pass for a free.
const TTL_MS = 60_000
const OPTIONS = { connectTimeoutMs: 500, commandTimeoutMs: 1_000 }
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let nodes
let servers = []
let proxy
let admins = []
let urls = []

before(async () => {
  nodes = await startProxiedNodes()
  ;({ servers, proxy, admins, urls } = nodes)
})

after(() => nodes.close())

/** Polls `read` until it answers something not null, or `ms` pass. */
async function untilSet(read, ms) {
  let value = null
  for (const deadline = Date.now() + ms; value === null && Date.now() < deadline; await sleep(20)) value = await read()
  return value
}

/** How many scripts node `i` has run. */
async function scriptsRun(i) {
  const stats = await admins[i].info('commandstats')
  let calls = 0
  for (const [, n] of stats.matchAll(/cmdstat_(?:eval|evalsha|fcall)[^:]*:calls=(\d+)/g)) calls += Number(n)
  return calls
}

const valuesOf = (key) => () => Promise.all(admins.map((admin) => admin.get(key)))

/** Releases `handle` while node 4 moves no bytes, then resets node 4's connections: the
 * release never reaches it. Answers once node 4 is reachable again. */
async function releaseUnreached(handle, key) {
  proxy.partition()
  await handle.release()
  assert.deepEqual(await valuesOf(key)(), [null, null, null, null, handle.token])
  // Past the release's bound on node 4: the runtime has given up on it.
  await sleep(OPTIONS.commandTimeoutMs + 200)
  proxy.reset()
  await sleep(200)
  assert.equal(await admins[4].get(key), handle.token, 'the reset let the release through')
  proxy.heal()
}

test('a release node 4 did not answer is sent again once it answers, well before the TTL', async () => {
  const lock = new DistributedLock(urls, { keyPrefix: 'rlr:', ...OPTIONS })
  const values = valuesOf('rlr:k')
  for (let round = 0; round < 2; round++) {
    const handle = await lock.acquire('k', TTL_MS)
    assert.deepEqual(await until(values, Array(5).fill(handle.token), 3_000), Array(5).fill(handle.token))
    await releaseUnreached(handle, 'rlr:k')
    const left = await until(values, Array(5).fill(null), 10_000)
    assert.deepEqual(left, Array(5).fill(null), `round ${round}: node 4 keeps a released lock`)
  }
  assert.deepEqual(unhandled, [])
})

test('a failed acquisition whose undo did not reach node 4 frees its key there once it answers', async () => {
  const lock = new DistributedLock(urls, { keyPrefix: 'rlu:', ...OPTIONS })
  const values = valuesOf('rlu:k')
  // Warm: every node's runtime connection open.
  await (await lock.acquire('warm', 5_000)).release()
  // Another holder on nodes 0 and 1: our attempt wins 2 and 3, and needs node 4 to decide.
  for (const admin of admins.slice(0, 2)) await admin.set('rlu:k', 'other', 'PX', TTL_MS)
  // Node 4 stopped: our attempt waits in its socket, run when it resumes.
  servers[4].pause()
  let resumed = false
  try {
    const trying = lock.tryAcquire('k', TTL_MS).catch((err) => err)
    await sleep(200)
    // The undo, sent once node 4's bound passes, stays in the proxy.
    proxy.partition()
    const got = await trying
    assert.ok(got === null || got instanceof Error, `acquired without a quorum: ${got}`)
    const firstFour = await Promise.all(admins.slice(0, 4).map((admin) => admin.get('rlu:k')))
    assert.deepEqual(firstFour, ['other', 'other', null, null])
    servers[4].resume()
    resumed = true
    // Node 4 ran our attempt; its undo is still in the proxy.
    const ours = await untilSet(() => admins[4].get('rlu:k'), 2_000)
    assert.ok(ours !== null && ours !== 'other', `node 4 never ran the attempt: ${ours}`)
    await sleep(OPTIONS.commandTimeoutMs)
    proxy.reset()
    await sleep(200)
    assert.equal(await admins[4].get('rlu:k'), ours, 'the reset let the undo through')
    proxy.heal()
    const left = await until(values, ['other', 'other', null, null, null], 10_000)
    assert.deepEqual(left, ['other', 'other', null, null, null], 'node 4 keeps a failed attempt’s key')
  } finally {
    if (!resumed) servers[4].resume()
    proxy.heal()
  }
  assert.deepEqual(unhandled, [])
})

test('a release owed to node 4 never frees a later holder’s key there', async () => {
  const lock = new DistributedLock(urls, { keyPrefix: 'rll:', ...OPTIONS })
  // A later holder reaching every node directly.
  const later = new DistributedLock(servers.map((server) => server.url), { keyPrefix: 'rll:', ...OPTIONS })
  const values = valuesOf('rll:k')
  const handle = await lock.acquire('k', TTL_MS)
  assert.deepEqual(await until(values, Array(5).fill(handle.token), 3_000), Array(5).fill(handle.token))
  proxy.partition()
  await handle.release()
  // Node 4's copy of ours gone as its TTL would have it; the later holder takes all five.
  await admins[4].del('rll:k')
  const theirs = await later.acquire('k', TTL_MS)
  assert.deepEqual(await values(), Array(5).fill(theirs.token))
  await sleep(OPTIONS.commandTimeoutMs + 200)
  const scripts = await scriptsRun(4)
  proxy.reset()
  proxy.heal()
  // The owed release reaches node 4 (a probe follows the reset within a few hundred ms), and
  // finds the later holder's key, which stays.
  for (const deadline = Date.now() + 5_000; (await scriptsRun(4)) === scripts && Date.now() < deadline; ) await sleep(20)
  assert.ok((await scriptsRun(4)) > scripts, 'the owed release never reached node 4')
  assert.deepEqual(await values(), Array(5).fill(theirs.token), 'an owed release freed a later holder’s key')
  await theirs.release()
  assert.deepEqual(await values(), Array(5).fill(null))
  assert.deepEqual(unhandled, [])
})
