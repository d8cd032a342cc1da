'use strict'

// A Redlock's calls on the JS thread's own sockets, one per node, decided at the quorum
// (docs/plans/redlock-fast.md): acquire, release, tryAcquire and waitForLock go out on the 5
// sockets (DEBUG lines name each node's address) and on the runtime with
// NATIVE_REDIS_LOCK_DIRECT=0; 4 processes, 2 on each path, keep an exact counter with fences
// that strictly increase; a lock held on a majority is held, and our token left on no node;
// a node paused (SIGSTOP by pid) while we acquire keeps no token after the release;
// 3 of 5 killed fails fast with the quorum error, never "held". 5 private redis-servers,
// killed by pid at the end.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFile } = require('node:child_process')
const Redis = require('ioredis')
const { startChild, killAll } = require('./helpers/child')
const { startRedis } = require('./helpers/redis-server')
const { directConnections } = require('./helpers/direct')
const { DistributedLock } = require('..')

const INCREMENT = path.join(__dirname, 'fixtures', 'redlock-increment.js')
const TRACE = path.join(__dirname, 'fixtures', 'redlock-fast-trace.js')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// An attempt's trace line: the script (the runtime's), or on a node's socket the transaction.
const ATTEMPT = / (EVALSHA acquire \[|MULTI; SET )rlf-trace:k/

let servers = []
let urls = []
let admins = []
const children = new Set()

before(async () => {
  servers = await Promise.all(Array.from({ length: 5 }, () => startRedis()))
  urls = servers.map((server) => server.url)
  admins = urls.map((url) => new Redis(url, { connectionName: 'test-admin' }))
})

after(async () => {
  killAll(children)
  for (const admin of admins) admin.disconnect()
  await Promise.all(servers.map((server) => server.close()))
})

/** Pairs on `lock` until every node has one of our JS-thread connections. */
async function warm(lock, on = admins) {
  for (let tries = 0; tries < 200; tries++) {
    const handle = await lock.acquire('rlf-warm', 5_000)
    await handle.release()
    const open = await Promise.all(on.map(directConnections))
    if (open.every((ids) => ids.length > 0)) return
    await sleep(10)
  }
  throw new Error('the nodes’ JS-thread connections never opened')
}

describe('the calls go out on one JS-thread socket per node', () => {
  const traced = (env) =>
    new Promise((resolve, reject) => {
      const options = { env: { ...process.env, DEBUG: 'native-redis-lock', ...env }, timeout: 30_000 }
      execFile(process.execPath, [TRACE, JSON.stringify(urls)], options, (err, stdout, stderr) => {
        if (err) return reject(Object.assign(err, { stderr }))
        const measured = stderr.split('--- measured ---\n')[1]?.split('--- done ---')[0]
        assert.ok(measured !== undefined, stderr)
        resolve(measured.split('\n').filter((line) => ATTEMPT.test(line) || / EVALSHA release_wake \[rlf-trace:k/.test(line)))
      })
    })
  const ports = urls => new Set(urls.map((url) => new URL(url).port))

  test('acquire, tryAcquire, waitForLock and release: socket lines for each of the 5 nodes, none runtime', async () => {
    const lines = await traced({})
    const via = lines.map((line) => / native-redis-lock (socket 127\.0\.0\.1:(\d+)|\S+) /.exec(line))
    assert.ok(lines.length >= 3 * 3 * 2, lines.join('\n'))
    for (const [i, match] of via.entries()) assert.ok(match?.[2], `not on a node's socket: ${lines[i]}`)
    const acquirePorts = new Set(via.filter((m, i) => ATTEMPT.test(lines[i])).map((m) => m[2]))
    const releasePorts = new Set(via.filter((m, i) => / EVALSHA release_wake /.test(lines[i])).map((m) => m[2]))
    assert.deepEqual(acquirePorts, ports(urls))
    assert.deepEqual(releasePorts, ports(urls))
    // Attempts go as the transaction on every node's socket (they take MULTI), as on one server.
    const transactions = new Set(via.filter((m, i) => / MULTI; SET rlf-trace:k/.test(lines[i])).map((m) => m[2]))
    assert.deepEqual(transactions, ports(urls))
  })

  test('NATIVE_REDIS_LOCK_DIRECT=0: the runtime carries them all', async () => {
    const lines = await traced({ NATIVE_REDIS_LOCK_DIRECT: '0' })
    assert.ok(lines.length >= 3 * 3 * 2, lines.join('\n'))
    for (const line of lines) assert.match(line, / native-redis-lock runtime EVALSHA /)
  })
})

describe('4 processes on one key, 2 on the sockets and 2 on the runtime', () => {
  test('an exact counter, and fences that strictly increase across both paths', async () => {
    const keys = { LOCK_KEY: 'rlf:count', COUNTER_KEY: 'rlf:count:counter', GO_KEY: 'rlf:count:go' }
    const ITERATIONS = 40
    const env = { NODES: JSON.stringify(urls), COUNTER_URL: urls[0], ITERATIONS: String(ITERATIONS), ...keys }
    const setups = [
      { API: 'wait' },
      { API: 'using' },
      { API: 'wait', NATIVE_REDIS_LOCK_DIRECT: '0' },
      { API: 'using', NATIVE_REDIS_LOCK_DIRECT: '0' },
    ]
    const kids = setups.map((setup) => startChild(INCREMENT, { ...env, ...setup }, children))
    await Promise.all(kids.map((kid) => kid.ready))
    await admins[0].rpush(keys.GO_KEY, ...kids.map((_, i) => `go-${i}`))
    const codes = await Promise.all(kids.map((kid) => kid.exited))
    codes.forEach((code, i) => assert.equal(code, 0, `child ${i} failed: ${kids[i].stderr}`))
    assert.equal(Number(await admins[0].get(keys.COUNTER_KEY)), setups.length * ITERATIONS, 'an update was lost')
    const sections = kids.flatMap((kid) => JSON.parse(kid.lines.find((line) => line.startsWith('{'))).sections)
    sections.sort((a, b) => a[0] - b[0])
    sections.forEach(([value], i) => assert.equal(value, i + 1))
    const fences = sections.map(([, fence]) => BigInt(fence))
    fences.forEach((fence, i) => {
      if (i > 0) assert.ok(fence > fences[i - 1], `section ${i + 1} got fence ${fence} after ${fences[i - 1]}`)
    })
  })
})

describe('a lock held on a majority by someone else', () => {
  test('tryAcquire is null, acquire is ELOCKED, and no node keeps our token', async () => {
    const lock = new DistributedLock(urls, { keyPrefix: 'rlf-held:', maxRetries: 0 })
    await warm(lock)
    const key = 'rlf-held:k'
    for (const admin of admins.slice(0, 3)) await admin.set(key, 'someone-else', 'PX', 20_000)
    for (let round = 0; round < 5; round++) {
      assert.equal(await lock.tryAcquire('k', 5_000), null)
      await assert.rejects(lock.acquire('k', 5_000), (err) => err.code === 'ELOCKED')
      // The nodes that had not answered when the majority said held are freed without
      // being waited for (by the runtime's undo, or by their own socket's when they answer
      // later): soon, not necessarily before the call settles.
      const expected = ['someone-else', 'someone-else', 'someone-else', null, null]
      let values
      for (const deadline = Date.now() + 2_000; Date.now() < deadline; await sleep(5)) {
        values = await Promise.all(admins.map((admin) => admin.get(key)))
        if (JSON.stringify(values) === JSON.stringify(expected)) break
      }
      assert.deepEqual(values, expected, `round ${round}`)
    }
    // Still on the sockets: nothing held there broke them.
    const open = await Promise.all(admins.map(directConnections))
    assert.ok(open.every((ids) => ids.length > 0))
    for (const admin of admins) await admin.del(key)
    const handle = await lock.acquire('k', 5_000)
    await handle.release()
  })
})

describe('a node paused while we acquire: its reply comes after the quorum decided', () => {
  test('its win is not left on the node after the release, nor once past its bound', async () => {
    const lock = new DistributedLock(urls, { keyPrefix: 'rlf-late:', connectTimeoutMs: 500, commandTimeoutMs: 500 })
    await warm(lock)
    // The runtime's own connection to each node open (isLocked goes on the runtime).
    await lock.isLocked('k2')
    const paused = servers[4]
    process.kill(paused.pid, 'SIGSTOP')
    try {
      // A read on the runtime's connection to the paused node, queued there first: once
      // resumed, the node serves that connection first.
      assert.equal(await lock.isLocked('k2'), false)
      // Released at once: the release goes out behind the paused node's attempt.
      const first = await lock.acquire('k', 30_000)
      await first.release()
      // Held past the paused node's bound (its socket retired), then released on the
      // runtime, behind that read: the release runs there before the attempt does.
      const second = await lock.acquire('k2', 30_000)
      await sleep(800)
      await second.release()
      await sleep(300)
    } finally {
      process.kill(paused.pid, 'SIGCONT')
    }
    const left = async () => Promise.all(['rlf-late:k', 'rlf-late:k2'].map((key) => admins[4].get(key)))
    let values
    for (const deadline = Date.now() + 3_000; Date.now() < deadline; await sleep(20)) {
      values = await left()
      if (values.every((value) => value === null)) break
    }
    assert.deepEqual(values, [null, null], 'the paused node keeps a token nobody holds')
    await sleep(300)
    assert.deepEqual(await left(), [null, null])
    for (const admin of admins.slice(0, 4)) {
      assert.deepEqual(await Promise.all(['rlf-late:k', 'rlf-late:k2'].map((key) => admin.get(key))), [null, null])
    }
    // And the lock works on every node again.
    const handle = await lock.acquire('k', 5_000)
    await handle.release()
  })
})

describe('3 of 5 killed', () => {
  test('acquire fails fast with the quorum error naming how many answered, never ELOCKED', async () => {
    const lock = new DistributedLock(urls, { connectTimeoutMs: 500, commandTimeoutMs: 500 })
    await warm(lock)
    await Promise.all(servers.slice(2).map((server) => server.kill()))
    for (const key of ['rlf-dead:a', 'rlf-dead:b', 'rlf-dead:a']) {
      const started = Date.now()
      const err = await lock.acquire(key, 2_000).then(
        () => assert.fail('acquired without a quorum'),
        (e) => e,
      )
      const took = Date.now() - started
      assert.notEqual(err.code, 'ELOCKED', `a quorum failure reported as held: ${err.message}`)
      assert.equal(err.code, 'ECONNECTION', err.stack)
      assert.match(err.message, /2 of 5 Redlock nodes answered; a quorum is 3/)
      assert.ok(took < 3_000, `acquire took ${took} ms to fail`)
    }
  })
})
