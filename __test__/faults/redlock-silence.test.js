'use strict'

// A Redlock node slower than an attempt's own bound (a short TTL's validity) but well within the
// command timeout: its part of each quorum call is cut short by the attempt, not by a silent
// node, so its JS-thread socket is kept (the runtime's SilenceBar, src/core/backend/silences.rs,
// judges both), as one server's is (issue 26); once nothing comes back for a whole command
// timeout it is retired. 5 private redis-servers, node 4 behind a delaying proxy.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startProxiedNodes, openSockets, sleep } = require('../helpers/proxied-nodes')
const { directConnections } = require('../helpers/direct')
const { DistributedLock } = require('../..')

const COMMAND_TIMEOUT_MS = 2_000
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let nodes

before(async () => {
  nodes = await startProxiedNodes()
})

after(() => nodes.close())

test('a node slower than the attempts’ validity keeps its JS-thread socket; silent for a command timeout, it is retired', async () => {
  const lock = new DistributedLock(nodes.urls, { keyPrefix: 'rls:', connectTimeoutMs: 500, commandTimeoutMs: COMMAND_TIMEOUT_MS })
  const before = (await openSockets(lock, nodes.admins))[4]
  // Past a 200 ms TTL's validity (the proxy delays each way, chunks overlapping), far within
  // the command timeout.
  nodes.proxy.setDelay(400)
  for (let round = 0; round < 5; round++) {
    const handle = await lock.acquire(`k${round}`, 200)
    await handle.release()
  }
  nodes.proxy.setDelay(0)
  // Every late reply in; the next calls would open another socket for a retired one.
  await sleep(1_500)
  for (let round = 0; round < 3; round++) await (await lock.acquire('next', 5_000)).release()
  await sleep(300)
  // No socket opened since (a loaded machine may have had one more open while warming).
  const kept = await directConnections(nodes.admins[4])
  assert.ok(kept.length > 0 && kept.every((id) => before.includes(id)), `node 4’s socket was retired: ${kept} ${before}`)
  // Nothing answered for the command timeout: retired, and another opened for later calls.
  nodes.proxy.partition()
  const handle = await lock.acquire('silent', 10_000)
  await sleep(COMMAND_TIMEOUT_MS + 500)
  nodes.proxy.heal()
  await handle.release()
  let after = before
  for (const deadline = Date.now() + 5_000; Date.now() < deadline; await sleep(50)) {
    await (await lock.acquire('again', 5_000)).release()
    after = await directConnections(nodes.admins[4])
    if (after.length > 0 && !after.some((id) => before.includes(id))) break
  }
  assert.ok(!after.some((id) => before.includes(id)), `node 4’s silent socket was kept: ${after} ${before}`)
  assert.deepEqual(unhandled, [])
})
