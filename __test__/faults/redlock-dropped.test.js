'use strict'

// A Redlock's releases left as stragglers on a silent node, then dropped by the straggler
// pool before their own timeout (more than its MAX_OUT, 4096, out at once: here the
// acquisitions that follow, each leaving one on the silent node; src/core/backend/
// redlock_pool.rs). A dropped release is owed to its node as one past its bound is
// (redlock_owed.rs): once the node answers again it frees our keys there, well before their
// TTL. The runtime's own calls (NATIVE_REDIS_LOCK_DIRECT=0). 5 private redis-servers, node 4
// behind a proxy that stops moving bytes and then resets its connections, so that nothing
// written to it meanwhile reaches it; checked with a raw client. Servers stopped by pid.
process.env.NATIVE_REDIS_LOCK_DIRECT = '0'
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { startProxiedNodes, sleep } = require('../helpers/proxied-nodes')
const { DistributedLock } = require('../..')

const TTL_MS = 60_000
// Long enough that no straggler ends by its own timeout while the test runs.
const OPTIONS = { connectTimeoutMs: 500, commandTimeoutMs: 60_000 }
const RELEASED = 300
// With the releases' stragglers, past MAX_OUT by more than the generations they fill.
const PUSHING = 4096 + 3 * 256

/** `count` calls of `call(i)`, 256 at a time. */
async function inBatches(count, call) {
  const out = []
  for (let from = 0; from < count; from += 256) {
    const batch = Array.from({ length: Math.min(256, count - from) }, (_, j) => call(from + j))
    out.push(...(await Promise.all(batch)))
  }
  return out
}

test('releases a silent node missed, dropped from the straggler pool, are still sent to it once it answers', async () => {
  const unhandled = []
  process.on('unhandledRejection', (reason) => unhandled.push(reason))
  const nodes = await startProxiedNodes()
  try {
    await releasesOwedPastThePool(nodes)
  } finally {
    await nodes.close()
  }
  assert.deepEqual(unhandled, [])
})

/** The test's body on `nodes` (helpers/proxied-nodes.js). */
async function releasesOwedPastThePool({ proxy, admins, urls }) {
  const lock = new DistributedLock(urls, { keyPrefix: 'rld:', ...OPTIONS })
  const ours = async () => (await admins[4].keys('rld:r*')).length
  const handles = await inBatches(RELEASED, (i) => lock.acquire(`r${i}`, TTL_MS))
  for (let tries = 0; (await ours()) < RELEASED && tries < 100; tries++) await sleep(20)
  assert.equal(await ours(), RELEASED)
  const pushed = []
  try {
    proxy.partition()
    await Promise.all(handles.map((handle) => handle.release()))
    // Each acquisition leaves a straggler on node 4 too: the releases', the oldest, go first.
    pushed.push(...(await inBatches(PUSHING, (i) => lock.acquire(`a${i}`, TTL_MS))))
    assert.equal(await ours(), RELEASED, 'node 4 was reached while partitioned')
    proxy.reset()
    await sleep(200)
    assert.equal(await ours(), RELEASED, 'the reset let the releases through')
  } finally {
    proxy.heal()
  }
  let left = RELEASED
  for (const deadline = Date.now() + 15_000; left > 0 && Date.now() < deadline; await sleep(50)) left = await ours()
  assert.equal(left, 0, `node 4 keeps ${left} released locks`)
  await inBatches(pushed.length, (i) => pushed[i].release())
}
