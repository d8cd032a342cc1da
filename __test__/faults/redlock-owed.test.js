'use strict'

// A Redlock release sent on the nodes' own JS-thread sockets, decided by a quorum while one
// node had not got it: that node's socket then breaks (reset by a proxy while it carried no
// bytes, so the release never reached the node). The node is owed the release
// (src/core/backend/redlock_owed.rs): once it answers again it holds no token of ours, well
// within the lock's TTL. So is an undo written on a node's socket (a straggler's win read past
// its bound) that breaks before the undo ran. 5 private redis-servers, one behind a proxy;
// checked on the node itself with a raw client. Servers stopped by pid.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startProxiedNodes, openSockets, until, sleep } = require('../helpers/proxied-nodes')
const { DistributedLock } = require('../..')

// Long enough that the node's copy expiring on its own cannot pass for the release.
const TTL_MS = 60_000
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let nodes
let proxy
let admins = []

before(async () => {
  nodes = await startProxiedNodes()
  ;({ proxy, admins } = nodes)
})

after(() => nodes.close())

/** An acquisition of `k` held on all five nodes. One may be decided without node 4 (its
 * connections were reset a moment before: a quorum of 4 is a win, and Redlock writes no node
 * afterwards), so up to 5 are tried; a node left unusable would miss every one. */
async function heldOnEvery(lock, values, ttl, when) {
  const seen = []
  for (let tries = 0; tries < 5; tries++) {
    const handle = await lock.acquire('k', ttl)
    // Decided at the quorum: the proxied node may take it a moment later.
    const held = await until(values, Array(5).fill(handle.token), 3_000)
    seen.push(held.map((value) => (value === handle.token ? 'ours' : value)))
    if (held.every((value) => value === handle.token)) return handle
    await handle.release()
  }
  assert.fail(`${when}: no acquisition held on every node: ${JSON.stringify(seen)}`)
}

test('a node whose socket broke before a decided release reached it is released once it answers again', async () => {
  const lock = new DistributedLock(nodes.urls, { keyPrefix: 'rlo:', connectTimeoutMs: 500, commandTimeoutMs: 2_000 })
  // Every node's JS-thread socket open, so the release goes out on them.
  await openSockets(lock, admins)
  const values = () => Promise.all(admins.map((admin) => admin.get('rlo:k')))

  for (let round = 0; round < 3; round++) {
    const handle = await heldOnEvery(lock, values, TTL_MS, `round ${round}`)
    // Node 4 stops moving bytes: its part of the release waits in the proxy, unsent.
    proxy.partition()
    await handle.release()
    assert.deepEqual(await values(), [null, null, null, null, handle.token])
    // Its socket is reset with the release still in the proxy: it never reaches the node.
    proxy.reset()
    await sleep(200)
    assert.equal(await admins[4].get('rlo:k'), handle.token, 'the reset let the release through')
    proxy.heal()
    // Owed to the node and sent on its runtime connection once that reconnects (the TTL is a
    // minute: not the expiry's doing).
    const left = await until(values, Array(5).fill(null), 10_000)
    assert.deepEqual(left, Array(5).fill(null), `round ${round}: the node keeps a released lock`)
  }
  // And the lock works on every node again.
  await (await heldOnEvery(lock, values, 5_000, 'after the rounds')).release()
  assert.deepEqual(unhandled, [])
})

test('an undo written on a node’s socket that broke before the undo ran is owed to the node', async () => {
  const lock = new DistributedLock(nodes.urls, { keyPrefix: 'rlu:', connectTimeoutMs: 500, commandTimeoutMs: 1_000 })
  await openSockets(lock, admins)
  const values = () => Promise.all(admins.map((admin) => admin.get('rlu:k')))
  // Node 4 answers 1.2 s after the call, past the attempt's 1 s bound: its win, read late
  // while the lock is ours, is undone on its socket (as the runtime frees an attempt past its
  // bound), and that undo reaches the node 0.6 s after it is written.
  proxy.setDelay(600)
  const sent = Date.now()
  const handle = await lock.acquire('k', TTL_MS)
  await sleep(1_500 - (Date.now() - sent))
  assert.deepEqual(await values(), Array(5).fill(handle.token))
  // The undo still in the proxy: the socket breaks before it runs.
  proxy.reset()
  proxy.setDelay(0)
  await sleep(200)
  // Owed to node 4 and sent on its runtime connection; the lock stays held on the others.
  const left = await until(values, [...Array(4).fill(handle.token), null], 5_000)
  assert.deepEqual(left, [...Array(4).fill(handle.token), null], 'node 4 keeps a win past its bound')
  await handle.release()
  assert.deepEqual(await values(), Array(5).fill(null))
  assert.deepEqual(unhandled, [])
})
