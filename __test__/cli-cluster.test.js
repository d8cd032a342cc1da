'use strict'

// The real binary on a Redis Cluster (3 masters, real processes) through redis+cluster://:
// locks the library wrote on keys of every master are listed and inspected from the master
// of their slot, `release --force` frees one on a master other than the first seed and moves
// its fence on there, `watch` hears the sharded wake-ups of a non-first master (in a
// pseudo-terminal too) and follows a slot moved while it runs (MOVED, ASK, SSUBSCRIBE again);
// seeds that do not answer are exit 4, a bad cluster URL exit 3, never printing a password.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const Redis = require('ioredis')
const { RedisCluster } = require('./helpers/redis-cluster')
const { startRedis, freePort } = require('./helpers/redis-server')
const { fenceKey, siblingKey } = require('./helpers/keys')
const { cli, inTerminal, until, BIN } = require('./helpers/cli')
const { inspectAndForce } = require('./helpers/cli-syncguard')
const { keySlot } = require('../lib/cli/key-slot')
const { connectCluster } = require('../lib/cli/cluster')
const { parseClusterAddress } = require('../lib/cli/host-list')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('..')
const sg = require('../syncguard')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let cluster
let url
let masters
/** The masters other than the one the URL names first. */
let others
const held = {} // master port -> { key, handle }: a DistributedLock on a key it serves
let waiting
let exclusive
let maestro
let record
let sgKey
const children = new Set()

before(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 0 })
  url = cluster.url
  masters = await cluster.masterPorts()
  others = masters.filter((port) => port !== cluster.nodes[0].port)
  const dl = new DistributedLock(url)
  for (const port of masters) {
    const key = await cluster.keyOn(port, 'job:', 'lock:')
    held[port] = { key: `lock:${key}`, handle: await dl.acquire(key, 60_000) }
  }
  // A waiter on another connection, queued on the last master's lock.
  const queued = held[others.at(-1)]
  waiting = new DistributedLock(url).waitForLock(queued.key.slice('lock:'.length), 60_000, 1000).catch((err) => err)
  exclusive = new ExclusiveLock({ name: await cluster.keyOn(others[0], 'report-', 'exclusive-lock:'), cache_connection: url, lock_contents: 'host-b' })
  // Its refreshes may fail while a test stops its master from answering.
  exclusive.on('error', () => {})
  assert.equal(await exclusive.acquire(), true)
  maestro = new DistributedLockService(await cluster.keyOn(others.at(-1), 'MAESTRO-'), 60_000, url)
  assert.equal(await maestro.acquire(60_000), true)
  const tag = await cluster.keyOn(masters[0], 'sg')
  record = await sg.createRedisBackend(url, { keyPrefix: `{${tag}}` }).acquire({ key: 'daily', ttlMs: 60_000 })
  assert.equal(record.ok, true)
  sgKey = `{${tag}}:daily`
  // Wait until the waiter is in the queue, so the tests see it.
  const queue = siblingKey(queued.key, 'waiting')
  const deadline = Date.now() + 5000
  while (Number(await cluster.command(others.at(-1), 'ZCARD', queue)) === 0) {
    assert.ok(Date.now() < deadline, 'the waiter did not queue')
    await sleep(20)
  }
})

after(async () => {
  for (const child of children) child.kill('SIGKILL')
  for (const { handle } of Object.values(held)) await handle.release().catch(() => {})
  const late = await waiting
  if (late && typeof late.release === 'function') await late.release()
  await exclusive?.release().catch(() => {})
  await maestro?.release().catch(() => {})
  await record?.release?.().catch(() => {})
  await cluster?.close()
})

/** What the master serving `key` holds at `fenceKey(key)`. */
async function counterOf(key) {
  return cluster.command(await cluster.masterOf(key), 'GET', fenceKey(key))
}

test('the slot the CLI computes is the one the cluster computes, hash tags and 0xFF bytes too', async () => {
  const keys = ['lock:job:1', '{user1000}.following', 'foo{}{bar}', 'foo{{bar}}zap', 'lock:user:{42}:profile',
    Buffer.concat([Buffer.from('{lock:a}'), Buffer.from([0xff]), Buffer.from('fence')]), 'ключ']
  for (const key of keys) {
    assert.equal(keySlot(key), Number(await cluster.command(masters[0], 'CLUSTER', 'KEYSLOT', key)), String(key))
  }
})

test('list --json finds the locks of every master, with the TTL, fence counter and queue their master holds', async () => {
  const { code, stdout, stderr } = await cli(['list', '--json', '--url', url])
  assert.equal(code, 0, stderr)
  const locks = JSON.parse(stdout)
  const byKey = Object.fromEntries(locks.map((l) => [l.key, l]))
  for (const { key, handle } of Object.values(held)) {
    const lock = byKey[key]
    assert.ok(lock, `${key} listed: ${stdout}`)
    assert.equal(lock.api, 'distributed-lock')
    assert.equal(lock.holder, `${handle.token.slice(0, 8)}…`)
    assert.ok(lock.ttlMs > 50_000 && lock.ttlMs <= 60_000, `${key}: ${lock.ttlMs}`)
    assert.equal(lock.fenceCounter, await counterOf(key))
    assert.ok(BigInt(lock.fenceCounter) >= BigInt(handle.fence))
  }
  const servedBy = new Set(await Promise.all(Object.values(held).map((h) => cluster.masterOf(h.key))))
  assert.equal(servedBy.size, 3, 'the locks are on all three masters')
  assert.equal(locks[0].key, held[others.at(-1)].key, 'the waited-for lock first')
  assert.ok(locks[0].waiters >= 1)
  const ex = locks.find((l) => l.api === 'exclusive-lock')
  assert.deepEqual(ex.contents, { lock_contents: 'host-b' })
  assert.equal(await cluster.masterOf(ex.key), others[0])
  const service = locks.find((l) => l.api === 'maestro')
  assert.ok(service && service.ttlMs > 50_000, stdout)
  const sgLock = byKey[sgKey]
  assert.equal(sgLock.api, 'syncguard')
  assert.equal(sgLock.fence, record.fence)
  assert.equal(sgLock.holder, `${record.lockId.slice(0, 8)}…`)
  assert.equal(locks.length, 6, `nothing else, each once: ${stdout}`)
  for (const lock of locks) assert.deepEqual(Object.keys(lock).sort(), ['api', 'contents', 'fence', 'fenceCounter', 'holder', 'key', 'ttlMs', 'waiters'])

  const text = await cli(['list', 'lock:*', '--url', url])
  assert.equal(text.code, 0, text.stderr)
  const [header, ...rows] = text.stdout.trim().split('\n')
  assert.match(header, /^key\s+api\s+holder\s+ttlMs\s+fence\s+counter\s+waiters\s+contents$/)
  assert.deepEqual(rows.map((row) => row.split(/\s+/)[0]).sort(), Object.values(held).map((h) => h.key).sort())
})

test('inspect a lock on each master: holder, fence counter and queue from its master', async () => {
  for (const port of masters) {
    const { key, handle } = held[port]
    const { code, stdout, stderr } = await cli(['inspect', key, '--json', '--url', url])
    assert.equal(code, 0, `${key}: ${stderr}`)
    const lock = JSON.parse(stdout)
    assert.equal(lock.key, key)
    assert.equal(lock.holder, `${handle.token.slice(0, 8)}…`)
    assert.equal(lock.fenceCounter, await cluster.command(port, 'GET', fenceKey(key)))
    assert.equal(lock.keys.fence, fenceKey(key).toString('latin1'))
    assert.equal(lock.queue.length, port === others.at(-1) ? 1 : 0, `${key}: ${stdout}`)
  }
  const sgText = await cli(['inspect', sgKey, '--url', url])
  assert.equal(sgText.code, 0, sgText.stderr)
  assert.match(sgText.stdout, /api:\s+syncguard/)
  const missing = await cli(['inspect', 'lock:no-such-key', '--url', url])
  assert.equal(missing.code, 5, missing.stderr)
})

test('release --force on a master other than the first seed: deleted there, its fence moved on', async () => {
  const port = others[0]
  const { key, handle } = held[port]
  const before = Number(await cluster.command(port, 'GET', fenceKey(key)))
  const { code, stdout, stderr } = await cli(['release', key, '--force', '--yes', '--json', '--url', url])
  assert.equal(code, 0, stderr)
  const result = JSON.parse(stdout)
  assert.equal(result.released, key)
  assert.equal(result.deletedKeys, 1)
  assert.equal(result.fenceCounter, String(before + 2))
  assert.equal(await cluster.command(port, 'EXISTS', key), 0)
  assert.equal(await cluster.command(port, 'GET', fenceKey(key)), String(before + 2))
  // The old holder is fenced out: the next holder's fence is above it.
  const locks = new DistributedLock(url)
  const next = await locks.acquire(key.slice('lock:'.length), 1000)
  assert.ok(BigInt(next.fence) > BigInt(handle.fence))
  await assert.rejects(handle.extend(1000))
  await next.release()
})

/** The one key on the master at `port` matching `pattern`. */
async function onlyKey(port, pattern) {
  const [, keys] = await cluster.command(port, 'SCAN', '0', 'MATCH', pattern, 'COUNT', 10_000)
  assert.equal(keys.length, 1, `${pattern}: ${keys}`)
  return keys[0]
}

test('syncguard under its default prefix (index and fence in the lock key\'s slot): inspected with both, forced free', async () => {
  const port = others[0]
  const key = await cluster.keyOn(port, 'nightly-', 'syncguard:')
  const lockKey = `syncguard:${key}`
  const backend = sg.createRedisBackend(url)
  const won = await backend.acquire({ key, ttlMs: 60_000 })
  assert.equal(won.ok, true)
  // Found on the master, independently of the CLI: `{<tag>}<syncguard's name>`.
  const index = await onlyKey(port, `{*}syncguard:id:${won.lockId}`)
  const fence = await onlyKey(port, `{*}syncguard:fence:${lockKey}`)
  const listed = JSON.parse((await cli(['list', 'syncguard:*', '--json', '--url', url])).stdout)
  assert.deepEqual(listed.map((l) => l.key), [lockKey])
  await inspectAndForce(url, (...args) => cluster.command(port, ...args), { backend, won, key, lockKey, index, fence })
})

test('syncguard through an ioredis Cluster client with a keyPrefix: index and fence found behind it, forced free', async () => {
  const io = new Redis.Cluster(cluster.seeds, { keyPrefix: 'app:' })
  try {
    const port = others[0]
    const key = await cluster.keyOn(port, 'nightly-', 'app:syncguard:')
    const lockKey = `app:syncguard:${key}`
    const backend = sg.createRedisBackend(io)
    const won = await backend.acquire({ key, ttlMs: 60_000 })
    assert.equal(won.ok, true)
    // Found on the master, independently of the CLI: `app:{<tag>}<syncguard's name>`.
    const index = await onlyKey(port, `app:{*}syncguard:id:${won.lockId}`)
    const fence = await onlyKey(port, `app:{*}syncguard:fence:syncguard:${key}`)

    await inspectAndForce(url, (...args) => cluster.command(port, ...args), { backend, won, key, lockKey, index, fence })
  } finally {
    io.disconnect()
  }
})

/** Two processes taking turns on `lock:<key>` through the cluster URL, until killed. */
function contend(key) {
  for (let i = 0; i < 2; i++) {
    const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'cli-contender.js')], {
      env: { ...process.env, URL: url, KEY: key },
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    children.add(child)
  }
  return () => {
    for (const child of children) child.kill('SIGKILL')
    children.clear()
  }
}

test('watch in a terminal: the wake-ups of a lock on a non-first master, heard by SSUBSCRIBE there', async () => {
  const port = others.at(-1)
  const key = await cluster.keyOn(port, 'hot', 'lock:')
  const stop = contend(key)
  try {
    const run = inTerminal(['watch', 'lock:hot*', '--interval', '300', '--url', url])
    children.add(run.child)
    const row = (frame) => frame.split(/\r?\n/).find((line) => line.startsWith(`lock:${key} `))
    const woken = (frame) => {
      const line = row(frame)
      return line && Number(line.replace(/\x1b\[K/g, '').trim().split(/\s+/).at(-1)) > 0
    }
    await until(run.output, (out) => out.split('\x1b[H').slice(1).some(woken))
    run.child.stdin.write('q')
    const { code, output } = await run.done
    assert.equal(code, 0, output)
    assert.ok(output.includes('\x1b[?25h\x1b[?1049l'), 'cursor and screen restored')
    const frames = output.split('\x1b[H').slice(1)
    assert.match(frames[0], /native-redis-lock watch redis\+cluster:\/\/127\.0\.0\.1:\d+,\S+ lock:hot\*/)
    assert.match(frames[0], /key\s+api\s+holder\s+ttlMs\s+waiters\s+acquisitions\/s\s+hand-overs\/s\s+wakes\/s/)
  } finally {
    stop()
  }
})

test('watch --json follows a slot moved while it runs: the lock stays listed, its wake-ups heard on the new master', async () => {
  const tag = '{moving}'
  const from = await cluster.masterOf(tag)
  const to = masters.find((port) => port !== from)
  const stay = await new DistributedLock(url).acquire(`${tag}:held`, 60_000)
  const stop = contend(`${tag}:hot`)
  const child = spawn(process.execPath, [BIN, 'watch', `lock:${tag}*`, '--json', '--interval', '300', '--url', url], { stdio: ['ignore', 'pipe', 'pipe'] })
  children.add(child)
  let out = ''
  let err = ''
  child.stdout.on('data', (chunk) => { out += chunk })
  child.stderr.on('data', (chunk) => { err += chunk })
  // Whole lines only: the last may be half written.
  const frames = () => out.slice(0, out.lastIndexOf('\n') + 1).split('\n').filter(Boolean).map((line) => JSON.parse(line))
  try {
    await until(() => frames().length, (n) => n >= 3)
    await cluster.migrate(keySlot(tag), from, to, { batch: 2, pauseMs: 300 })
    const moved = frames().length
    assert.equal(await cluster.command(to, 'EXISTS', `lock:${tag}:held`), 1, 'the slot moved')
    await until(() => frames().slice(moved + 1), (after) => after.some((f) => f.locks.find((l) => l.key === `lock:${tag}:hot`)?.wakesPerSec > 0), 15_000)
    // Listed in every frame (a SCAN that passed both masters mid-move keeps its row), and
    // read as held, from its new master, at the end.
    for (const frame of frames()) assert.ok(frame.locks.some((l) => l.key === `lock:${tag}:held`), JSON.stringify(frame))
    const last = frames().at(-1).locks.find((l) => l.key === `lock:${tag}:held`)
    assert.equal(last.holder, `${stay.token.slice(0, 8)}…`)
    assert.ok(last.ttlMs > 0)
    assert.equal(err, '')
  } finally {
    child.kill('SIGTERM')
    stop()
    await stay.release()
  }
})

test('inspect a lock whose queue holds members named like pub/sub messages: the ZRANGE replies are its own', async () => {
  const key = `lock:${await cluster.keyOn(others.at(-1), 'pushlike:', 'lock:')}`
  const handle = await new DistributedLock(url).acquire(key.slice('lock:'.length), 30_000)
  const queue = siblingKey(key, 'waiting')
  const port = await cluster.masterOf(key)
  // A command connection that took these arrays for pushes would leave ZRANGE unanswered.
  await cluster.command(port, 'ZADD', queue, 1, 'message', 2, 'smessage', 3, 'sunsubscribe')
  try {
    const { code, stdout, stderr } = await cli(['inspect', key, '--json', '--timeout', '2000', '--url', url])
    assert.equal(code, 0, stderr)
    assert.deepEqual(JSON.parse(stdout).queue, [
      { connection: 'message', since: 1 }, { connection: 'smessage', since: 2 }, { connection: 'sunsubscribe', since: 3 }])
  } finally {
    await cluster.command(port, 'DEL', queue)
    await handle.release()
  }
})

test('a node whose connection failed: connected afresh when next needed, and asked for the slot table last', async () => {
  // A bound far above a loaded machine's stalls: a refresh that asked the silent master
  // first would wait all of it.
  const client = await connectCluster(parseClusterAddress(url), { timeoutMs: 1500 })
  // The master asked first for the slot table, unless its connection failed.
  const port = client.masterAddresses()[0].port
  const { key } = held[port]
  const node = cluster.node(port)
  try {
    assert.ok(await client.call('PTTL', key) > 0)
    node.pause()
    try {
      await assert.rejects(client.call('PTTL', key),
        { message: new RegExp(`^Redis at cluster node 127\\.0\\.0\\.1:${port} did not answer PTTL within 1500 ms$`) })
      const started = Date.now()
      await client.refresh()
      assert.ok(Date.now() - started < 1000, `the silent master was asked first (${Date.now() - started} ms)`)
    } finally {
      node.resume()
    }
    assert.ok(await client.call('PTTL', key) > 0, 'a new connection to the master that answers again')
  } finally {
    client.close()
  }
  await cluster.waitOk()
})

test('a master that stops answering: exit 4 within --timeout, one line naming it', async () => {
  const port = others[0]
  const node = cluster.node(port)
  node.pause()
  try {
    const started = Date.now()
    const { code, stdout, stderr } = await cli(['list', '--timeout', '500', '--url', url])
    assert.equal(code, 4, stderr)
    assert.equal(stdout, '')
    assert.match(stderr, new RegExp(`^native-redis-lock: Redis at cluster node 127\\.0\\.0\\.1:${port} did not answer \\w+ within 500 ms\\n$`))
    assert.ok(Date.now() - started < 5000)
  } finally {
    node.resume()
  }
  await cluster.waitOk()
})

test('no seed answering: exit 4, one line naming the URL without its password; a dead seed before live ones is passed over', async () => {
  const [a, b] = [await freePort(), await freePort()]
  const started = Date.now()
  const down = await cli(['list', '--timeout', '1000', '--url', `redis+cluster://u:s3cret@127.0.0.1:${a},127.0.0.1:${b}`])
  assert.equal(down.code, 4, down.stderr)
  assert.match(down.stderr, new RegExp(`^native-redis-lock: no node of redis\\+cluster://u:\\*\\*\\*@127\\.0\\.0\\.1:${a},127\\.0\\.0\\.1:${b} answered CLUSTER SLOTS \\(.*ECONNREFUSED.*\\)\\n$`))
  assert.doesNotMatch(down.stderr, /s3cret/)
  assert.ok(Date.now() - started < 10_000)
  const key = await cluster.keyOn(masters[0], 'seeded:', 'lock:')
  const handle = await new DistributedLock(url).acquire(key, 30_000)
  try {
    const live = await cli(['inspect', `lock:${key}`, '--json', '--url', `redis+cluster://127.0.0.1:${a},127.0.0.1:${masters[0]}`])
    assert.equal(live.code, 0, live.stderr)
    assert.equal(JSON.parse(live.stdout).holder, `${handle.token.slice(0, 8)}…`)
  } finally {
    await handle.release()
  }
})

test('a server that is no cluster node given as a seed: exit 4, its answer named', async () => {
  const single = await startRedis()
  try {
    const { code, stderr } = await cli(['list', '--url', `redis+cluster://127.0.0.1:${single.port}`])
    assert.equal(code, 4, stderr)
    assert.match(stderr, /answered ERR This instance has cluster support disabled/)
    assert.equal(stderr.trim().split('\n').length, 1)
  } finally {
    await single.stop()
  }
})

test('a bad cluster URL: exit 3 with the reason, never the password', async () => {
  const cases = [
    [`redis+cluster://u:s3cret@127.0.0.1:${masters[0]}/0`, /takes no path or query: a cluster has database 0 only/],
    [`redis+cluster://u:se/cret@127.0.0.1:${masters[0]}`, /takes no path or query/],
    [`redis+cluster://u:s3cret@127.0.0.1:1,127.0.0.1:1`, /names node 127\.0\.0\.1:1 twice/],
    [`redis+cluster://u:s3cret@127.0.0.1:1,,127.0.0.1:2`, /empty entry/],
    ['redis+cluster://u:s3cret@127.0.0.1:99999', /node 1 \(of the host list\) is not host:port/],
  ]
  for (const [bad, reason] of cases) {
    const { code, stderr } = await cli(['list', '--url', bad])
    assert.equal(code, 3, `${bad}: ${stderr}`)
    assert.match(stderr, reason)
    assert.doesNotMatch(stderr, /s3cret|cret/)
    assert.equal(stderr.trim().split('\n').length, 1)
  }
})

test("watch's request reaches our processes on whichever master it is published, and is answered once", async () => {
  // This process waits on the cluster (before): its connection subscribed to the control
  // channel on one node; a request published on any master is broadcast to all.
  const channel = require('../lib/native').watchChannel()
  const replyTo = `native-redis-lock:watch:reply:cluster-${process.pid}`
  const listener = new Redis(cluster.nodes[0].port, '127.0.0.1')
  const answers = []
  listener.on('message', (_, payload) => answers.push(JSON.parse(payload)))
  try {
    await listener.subscribe(replyTo)
    for (const port of others) {
      const publisher = new Redis(port, '127.0.0.1')
      try {
        const id = `cluster-${port}`
        await publisher.publish(channel, `1\n${id}\n${replyTo}\nlock:*`)
        // Asked twice with one id (as a Redlock's nodes each hear one request): one answer.
        await publisher.publish(channel, `1\n${id}\n${replyTo}\nlock:*`)
        await until(() => answers, (heard) => heard.some((a) => a.id === id), 10_000)
      } finally {
        publisher.disconnect()
      }
    }
    await sleep(200)
    for (const port of others) {
      const mine = answers.filter((a) => a.id === `cluster-${port}` && a.pid === process.pid)
      assert.equal(mine.length, 1, JSON.stringify(answers))
      assert.ok(Array.isArray(mine[0].keys) && typeof mine[0].process === 'string', JSON.stringify(mine[0]))
    }
  } finally {
    listener.disconnect()
  }
})
