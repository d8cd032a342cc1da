'use strict'

// Faults on a Redlock's JS-thread quorum path (docs/plans/redlock-fast.md §8, tests 4, 5, 7,
// 8, 9 and 10; the others are in __test__/redlock-fast.test.js). 5 private redis-servers on
// free ports, paused, killed and restarted by pid only. Bounds are the command timeout and the
// validity, never "fast": the machine may be a loaded 2-core CI.
const { test, describe, before, after, beforeEach, afterEach } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const Redis = require('ioredis')
const { startRedis } = require('../helpers/redis-server')
const { startProxy } = require('../helpers/tcp-proxy')
const { directConnections } = require('../helpers/direct')
const { fenceKey } = require('../helpers/keys')
const { until } = require('../helpers/proxied-nodes')
const { record } = require('./figures')
const { DistributedLock } = require('../..')

const ROOT = require.resolve('../..')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let servers = []
let urls = []
let admins = []
// What the report (scripts/faults-report.js) publishes, filled by the tests that measure it.
const figures = {}

before(async () => {
  servers = await Promise.all(Array.from({ length: 5 }, () => startRedis()))
  urls = servers.map((server) => server.url)
  admins = urls.map((url) => new Redis(url, { connectionName: 'test-admin', maxRetriesPerRequest: 1 }).on('error', () => {}))
})

after(async () => {
  if (Object.keys(figures).length > 0) record('redlock-fast', 'Redlock, JS-thread quorum path', figures)
  for (const admin of admins) admin.disconnect()
  await Promise.all(servers.map((server) => server.close()))
})

/**
 * Pairs on `lock` until every node has a JS-thread connection. `fresh`: one it did not have
 * before (its nodes are new proxies: not another endpoint's). A JS thread's locks on the same
 * nodes share their sockets, so on `urls` any one is the lock's.
 */
async function warm(lock, { fresh = false } = {}) {
  const known = fresh ? await Promise.all(admins.map(directConnections)) : admins.map(() => [])
  for (let tries = 0; tries < 300; tries++) {
    const handle = await lock.acquire('rlf-warm', 5_000)
    await handle.release()
    const open = await Promise.all(admins.map(directConnections))
    if (open.every((ids, i) => ids.some((id) => !known[i].includes(id)))) return
    await sleep(10)
  }
  throw new Error('the nodes’ JS-thread connections never opened')
}

/** Each node's value of `key` (`admins` given: the live ones only). */
const values = (key, on = admins) => Promise.all(on.map((admin) => admin.get(key)))

/** Puts a killed server back on its port, empty, and reconnects its admin. */
async function revive(i) {
  if (servers[i].child?.exitCode === null && servers[i].child?.signalCode === null) return
  await servers[i].start()
}

describe('test 4: one node SIGSTOPped', () => {
  test('200 serial pairs each within the command timeout; after SIGCONT nothing breaks and calls return to the socket', async () => {
    const COMMAND_TIMEOUT = 1_000
    const lock = new DistributedLock(urls, { keyPrefix: 'rlf-stop:', commandTimeoutMs: COMMAND_TIMEOUT })
    await warm(lock)
    const paused = 4
    const live = admins.filter((_, i) => i !== paused)
    const before = await directConnections(admins[paused])
    servers[paused].pause()
    let slowest = 0
    try {
      for (let i = 0; i < 200; i++) {
        // Half way, past the paused node's bound: its socket is given up on, and the calls
        // go on without it (through the runtime until it reopens).
        if (i === 100) await sleep(2 * COMMAND_TIMEOUT)
        const started = Date.now()
        const handle = await lock.acquire('k', 30_000)
        await handle.release()
        const took = Date.now() - started
        slowest = Math.max(slowest, took)
        // Each call is bounded by the command timeout (the paused node's part gives up at its
        // bound, the runtime's gather at its own): a pair is two calls.
        assert.ok(took < 2 * COMMAND_TIMEOUT, `pair ${i} took ${took} ms`)
      }
      // The 4 live nodes are free: every release reached them.
      assert.deepEqual(await until(() => values('rlf-stop:k', live), Array(4).fill(null)), Array(4).fill(null))
    } finally {
      servers[paused].resume()
    }
    // The resumed node runs what it was sent, each acquire before its release on the same
    // connection: nothing of ours is left on it (the TTL is 30 s: not the TTL's doing).
    assert.deepEqual(await until(() => values('rlf-stop:k'), Array(5).fill(null), 5_000), Array(5).fill(null))
    // Calls return to the resumed node's own socket once it reopens: a new one, the one from
    // before the pause given up at its bound.
    let open = []
    for (const deadline = Date.now() + 10_000; Date.now() < deadline && open.length === 0; ) {
      const handle = await lock.acquire('k', 30_000)
      await handle.release()
      open = (await directConnections(admins[paused])).filter((id) => !before.includes(id))
      if (open.length === 0) await sleep(20)
    }
    assert.ok(open.length > 0, 'the resumed node’s JS-thread socket never reopened')
    for (let i = 0; i < 10; i++) {
      const handle = await lock.acquire('k', 30_000)
      const held = await until(() => values('rlf-stop:k'), Array(5).fill(handle.token))
      assert.deepEqual(held, Array(5).fill(handle.token), 'not held on every node after SIGCONT')
      await handle.release()
    }
    // Redis 7.0's CLIENT LIST has no per-connection count: its last command shows it carried ours.
    const line = await admins[paused].client('LIST', 'ID', open[0])
    assert.match(line, / cmd=evalsha /, 'the reopened socket carried none of the calls')
    assert.deepEqual(await until(() => values('rlf-stop:k'), Array(5).fill(null)), Array(5).fill(null))
    figures.stopped_node_slowest_pair_ms = slowest
  })
})

describe('test 7: 3 nodes behind a delaying proxy', () => {
  // Fresh proxies for each test: a new endpoint, so new sockets (see `warm`).
  let proxies = []
  beforeEach(async () => {
    proxies = await Promise.all(servers.slice(0, 3).map((server) => startProxy(server.port)))
  })
  afterEach(async () => {
    await Promise.all(proxies.map((proxy) => proxy.close()))
  })
  const nodes = () => [...proxies.map((proxy) => proxy.url), ...urls.slice(3)]

  test('TTL 40 ms, delayed past the validity: ETIMEDOUT (never won, never held), and every node free after', async () => {
    const lock = new DistributedLock(nodes(), { keyPrefix: 'rlf-delay:', commandTimeoutMs: 2_000 })
    await warm(lock, { fresh: true })
    for (const proxy of proxies) proxy.setDelay(150)
    try {
      for (let round = 0; round < 5; round++) {
        const key = `late-${round}`
        const err = await lock.acquire(key, 40).then(
          (handle) => assert.fail(`won past the validity (fence ${handle.fence})`),
          (e) => e,
        )
        // Slow nodes, not unreachable ones: the same error as the runtime's, which waits for
        // their late replies (never ECONNECTION "only 2 of 5 answered", never ELOCKED).
        assert.equal(err.code, 'ETIMEDOUT', err.stack)
        assert.match(err.message, /the lock's validity/)
        // The delayed nodes answer late (won there): what they took is undone, not left to
        // the 40 ms TTL alone. Counted after the late replies are in (150 ms each way).
        await sleep(400)
        assert.deepEqual(await until(() => values(`rlf-delay:${key}`), Array(5).fill(null)), Array(5).fill(null), `round ${round}`)
      }
    } finally {
      for (const proxy of proxies) proxy.setDelay(0)
    }
  })

  test('short delays: won; counted from the send: expiresAt ≤ sent + ttl, held no later than sent + ttl − drift', async () => {
    const lock = new DistributedLock(nodes(), { keyPrefix: 'rlf-delay:' })
    await warm(lock, { fresh: true })
    for (const proxy of proxies) proxy.setDelay(25)
    const ttl = 1_000
    const validity = ttl - ttl / 100 - 2
    try {
      for (let round = 0; round < 2; round++) {
        const before = Date.now()
        const pending = lock.acquire(`short-${round}`, ttl)
        // Sent within the call, on the JS thread: no later than now.
        const sentBy = Date.now()
        const handle = await pending
        assert.ok(Date.now() - before >= 45, 'the delay did not apply') // 50 ms, less Date.now()'s rounding
        // expiresAt is when Redis lets the key go at the latest (index.d.ts): sent + ttl,
        // from the send, not from the replies (≥ 50 ms later).
        const expiresAt = handle.info.expiresAt
        assert.ok(expiresAt <= sentBy + ttl + 1, `expiresAt ${expiresAt - sentBy} ms after the send`)
        assert.ok(expiresAt >= before + ttl - 1, `expiresAt ${expiresAt - before} ms after the call`)
        // Our own use of it ends sooner: the validity, less the drift, from the send.
        const due = sentBy + validity + 3
        while (Date.now() < due) await sleep(due - Date.now())
        assert.equal(handle.isHeld, false, `still held ${Date.now() - sentBy} ms after the send (validity ${validity})`)
        // Not released: its key runs out on the nodes (a release past the lease is the next
        // test's).
      }
    } finally {
      for (const proxy of proxies) proxy.setDelay(0)
    }
  })

  test('a release past the lease on delayed nodes waits for them (command timeout), no quorum error, and deletes our token where a node kept it', async () => {
    const lock = new DistributedLock(nodes(), { keyPrefix: 'rlf-delay:', commandTimeoutMs: 2_000 })
    await warm(lock, { fresh: true })
    const handle = await lock.acquire('expired', 300)
    // Two nodes keep our token past the lease (an extend only they got, say).
    for (const admin of admins.slice(0, 2)) assert.equal(await admin.pexpire('rlf-delay:expired', 30_000), 1)
    await sleep(400)
    assert.equal(handle.isHeld, false)
    // 60 ms each way to 3 of 5: past the lease's time left plus a grace (25 ms), which
    // bounded the release and left "only 2 of 5 Redlock nodes answered" (ECONNECTION).
    for (const proxy of proxies) proxy.setDelay(60)
    try {
      await handle.release()
    } finally {
      for (const proxy of proxies) proxy.setDelay(0)
    }
    assert.deepEqual(await values('rlf-delay:expired'), Array(5).fill(null))
  })
})

describe('test 8: acquired, then 2 nodes restarted empty at once', () => {
  test('another process cannot acquire, and the 3 others still hold our token', async () => {
    const lock = new DistributedLock(urls, { keyPrefix: 'rlf-restart:' })
    await warm(lock)
    const other = (key) =>
      new Promise((resolve, reject) => {
        const source = `
          const { DistributedLock } = require(${JSON.stringify(ROOT)})
          const lock = new DistributedLock(${JSON.stringify(urls)}, { keyPrefix: 'rlf-restart:' })
          lock.tryAcquire(${JSON.stringify(key)}, 30000).then(
            (handle) => { console.log(handle ? 'acquired' : 'null'); process.exit(0) },
            (err) => { console.log('error ' + err.code); process.exit(0) },
          )
        `
        execFile(process.execPath, ['-e', source], { timeout: 30_000 }, (err, stdout, stderr) => {
          if (err) return reject(Object.assign(err, { stderr }))
          resolve(stdout.trim())
        })
      })
    const pairs = [
      [0, 1],
      [3, 4],
      [1, 3],
    ]
    for (const [round, pair] of pairs.entries()) {
      const key = `k${round}`
      const handle = await lock.acquire(key, 30_000)
      // At once, as soon as the call resolved: the stragglers' commands were written with
      // the others, so they reach every node that runs.
      await Promise.all(pair.map((i) => servers[i].restart()))
      const kept = admins.filter((_, i) => !pair.includes(i))
      assert.deepEqual(await values(`rlf-restart:${key}`, kept), Array(3).fill(handle.token), `round ${round}: restarted ${pair}`)
      assert.equal(await other(key), 'null', `round ${round}: another process acquired while we hold it`)
      await handle.release()
    }
  })
})

describe('test 9: a worker thread exits mid quorum acquire', () => {
  test('what its code never received is freed on every node', async () => {
    const ROUNDS = 20
    const flags = new Int32Array(new SharedArrayBuffer(4 * ROUNDS))
    const source = `
      const { parentPort, workerData } = require('node:worker_threads')
      const { DistributedLock } = require(${JSON.stringify(ROOT)})
      const { urls, key, flags, index } = workerData
      const lock = new DistributedLock(urls, { keyPrefix: 'rlf-worker:' })
      ;(async () => {
        // Pairs first, so the nodes' JS-thread sockets are open when the call is made.
        for (let i = 0; i < 8; i++) {
          const handle = await lock.acquire('warm-' + index, 5000)
          await handle.release()
          await new Promise((r) => setTimeout(r, 10))
        }
        parentPort.once('message', () => {
          lock.acquire(key, 30000).then(() => Atomics.store(flags, index, 1), () => {})
          parentPort.postMessage('called')
        })
        parentPort.postMessage('ready')
      })()
    `
    const keys = []
    for (let index = 0; index < ROUNDS; index++) {
      const key = `mid-${index}`
      keys.push(`rlf-worker:${key}`)
      const known = await Promise.all(admins.map(directConnections))
      const worker = new Worker(source, { eval: true, workerData: { urls, key, flags, index } })
      const next = () =>
        new Promise((resolve, reject) => {
          worker.once('message', resolve)
          worker.once('error', reject)
        })
      await next()
      // The worker's own JS-thread sockets are open on every node: its call takes the quorum path.
      const fresh = async () => (await Promise.all(admins.map(directConnections))).map((ids, i) => ids.some((id) => !known[i].includes(id)))
      assert.deepEqual(await until(fresh, Array(5).fill(true)), Array(5).fill(true), 'the worker’s sockets did not open')
      worker.postMessage('go')
      await next()
      const delay = Math.random() * 2
      if (delay >= 0.5) await sleep(delay)
      await worker.terminate()
    }
    // What a terminated thread frees is sent as it goes; allow the nodes to run it.
    figures.worker_terminated_before_receiving = `${keys.filter((_, index) => !Atomics.load(flags, index)).length} of ${ROUNDS}`
    const left = []
    for (const [index, key] of keys.entries()) {
      if (Atomics.load(flags, index)) continue
      const held = await until(() => values(key), Array(5).fill(null))
      if (held.some((value) => value !== null)) left.push(`${key}: ${JSON.stringify(held)}`)
    }
    assert.deepEqual(left, [], `${left.length} of ${ROUNDS} locks outlived their terminated callers`)
  })
})

describe('test 10: fence counters preset unequal', () => {
  const counters = (key) => Promise.all(admins.map(async (admin) => Number((await admin.get(fenceKey(key))) ?? 0)))

  for (const preset of [
    [10, 0, 0, 0, 0],
    [10, 20, 30, 40, 50],
  ]) {
    test(`preset ${preset.join('/')}: the fence is written back to a majority, and the next one draws more`, async () => {
      const lock = new DistributedLock(urls, { keyPrefix: 'rlf-fence:' })
      await warm(lock)
      const key = `rlf-fence:${preset.join('-')}`
      await Promise.all(admins.map((admin, i) => admin.set(fenceKey(key), String(preset[i]))))
      const first = await lock.acquire(key.slice('rlf-fence:'.length), 30_000)
      const fence = BigInt(first.fence)
      // Above the highest counter of some majority (any 3 include one at the third lowest).
      const third = BigInt([...preset].sort((a, b) => a - b)[2])
      assert.ok(fence > third, `fence ${fence} not above every majority's counters`)
      const after = await counters(key)
      const reached = after.filter((value) => BigInt(value) >= fence).length
      // Without the write-back, fewer than 3 would: the counters differ.
      assert.ok(reached >= 3, `fence ${fence} reached only ${reached} nodes: ${after}`)
      await first.release()
      const second = await lock.acquire(key.slice('rlf-fence:'.length), 30_000)
      assert.ok(BigInt(second.fence) > fence, `${second.fence} after ${first.fence}`)
      await second.release()
    })
  }
})

describe('test 5: one node killed with 256 pairs in flight', () => {
  test('every promise settles, no unhandled rejection, counter exact, no lock key left on the live nodes', async () => {
    const lock = new DistributedLock(urls, { keyPrefix: 'rlf-kill:', commandTimeoutMs: 2_000 })
    await warm(lock)
    const killed = 4
    const live = admins.filter((_, i) => i !== killed)
    const counter = live[0]
    await counter.del('rlf-kill-counter')
    const KEYS = 16
    const PAIRS = 256
    let started = 0
    const released = new Set()
    const pair = async (i) => {
      const handle = await lock.waitForLock(`k${i % KEYS}`, 30_000, 60_000)
      started++
      released.add(handle.token)
      // A non-atomic increment: exact only under mutual exclusion.
      const value = Number((await counter.get(`rlf-kill-counter:${i % KEYS}`)) ?? 0)
      await counter.set(`rlf-kill-counter:${i % KEYS}`, String(value + 1))
      return handle.release()
    }
    const unhandledBefore = unhandled.length
    const all = Promise.allSettled(Array.from({ length: PAIRS }, (_, i) => pair(i)))
    while (started < 32) await sleep(1)
    const killedAt = Date.now()
    await servers[killed].kill()
    const results = await all
    figures.killed_node_256_settled_ms = Date.now() - killedAt
    try {
      const failed = results.filter((r) => r.status === 'rejected').map((r) => r.reason?.code ?? String(r.reason))
      assert.deepEqual(failed, [], `${failed.length} of ${PAIRS} pairs failed`)
      let total = 0
      for (let k = 0; k < KEYS; k++) total += Number((await counter.get(`rlf-kill-counter:${k}`)) ?? 0)
      assert.equal(total, PAIRS, 'an update was lost')
      const leftKeys = async () => (await Promise.all(live.map((admin) => admin.keys('rlf-kill:k*')))).map((keys) => keys.length)
      const left = await until(leftKeys, [0, 0, 0, 0])
      if (left.some((n) => n > 0)) {
        // What is left, for the report: whose token, and how long Redis keeps it.
        const seen = []
        for (const [n, admin] of live.entries()) {
          for (const key of await admin.keys('rlf-kill:k*')) {
            const [token, pttl] = [await admin.get(key), await admin.pttl(key)]
            seen.push(`node ${n} ${key} pttl ${pttl} ${released.has(token) ? 'a released handle’s token' : `token ${token}`}`)
          }
        }
        assert.fail(`lock keys left on the live nodes after every release: ${seen.join('; ')}`)
      }
      await sleep(50)
      assert.deepEqual(unhandled.slice(unhandledBefore), [])
    } finally {
      await revive(killed)
    }
  })
})
