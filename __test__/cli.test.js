'use strict'

// `npx native-redis-lock` (bin/native-redis-lock.js), the real binary against a private
// redis-server holding locks of all four APIs: list, inspect and release --force, their
// --json shapes, and every error path with its own exit code.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const Redis = require('ioredis')
const { startRedis, freePort } = require('./helpers/redis-server')
const { cli, inTerminal, until } = require('./helpers/cli')
const { inspectAndForce } = require('./helpers/cli-syncguard')
const { startHttpLike, startAnswering } = require('./helpers/not-redis')
const { makeCerts, startTlsRedis } = require('./helpers/tls-certs')
const { connect: connectServer, socketOptions } = require('../lib/cli/resp')
const { DistributedLock } = require('..')
const ExclusiveLock = require('../exclusive-lock')
const DistributedLockService = require('../maestro')
const sg = require('../syncguard')

let redis
let url
let dl
let held
let exclusive
let maestro
let syncguard
let waiting

/** One command on the test server, over a plain socket (the CLI is what is under test). */
function raw(...args) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(redis.port, '127.0.0.1')
    const wire = `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`
    socket.once('connect', () => socket.write(wire))
    socket.once('data', (data) => {
      socket.destroy()
      resolve(data.toString('utf8'))
    })
    socket.once('error', reject)
  })
}

before(async () => {
  redis = await startRedis()
  url = redis.url
  dl = new DistributedLock(url)
  held = await dl.acquire('job:1', 60_000)
  // A waiter on another connection queues itself in the lock's waiting set.
  waiting = new DistributedLock(url, { commandTimeoutMs: 4321 }).waitForLock('job:1', 60_000, 1000).catch((err) => err)
  exclusive = new ExclusiveLock({ name: 'nightly report', cache_connection: url, lock_contents: 'host-a' })
  assert.equal(await exclusive.acquire(), true)
  maestro = new DistributedLockService('MAESTRO-LOCK-orders', 60_000, url)
  assert.equal(await maestro.acquire(60_000), true)
  syncguard = await sg.createRedisBackend(url).acquire({ key: 'report:daily', ttlMs: 60_000 })
  assert.equal(syncguard.ok, true)
  await raw('SET', 'unrelated', 'not a lock')
  await raw('SET', 'lock:stray', 'a value with no fence counter')
})

after(async () => {
  await held.release().catch(() => {})
  const late = await waiting
  if (late && typeof late.release === 'function') await late.release()
  await exclusive.release()
  await maestro.release()
  await syncguard.release().catch(() => {})
  await redis.stop()
})

test('list --json: every lock of the four APIs, and nothing else', async () => {
  const { code, stdout, stderr } = await cli(['list', '--json', '--url', url])
  assert.equal(code, 0, stderr)
  const locks = JSON.parse(stdout)
  const byKey = Object.fromEntries(locks.map((l) => [l.key, l]))
  assert.deepEqual(Object.keys(byKey).sort(), [
    'MAESTRO-LOCK-orders', 'exclusive-lock:nightly-report', 'lock:job:1', 'syncguard:report:daily',
  ])
  const job = byKey['lock:job:1']
  assert.equal(job.api, 'distributed-lock')
  assert.equal(job.holder, `${held.token.slice(0, 8)}…`, 'the token cut short, never whole')
  assert.ok(job.ttlMs > 50_000 && job.ttlMs <= 60_000)
  assert.match(job.fenceCounter, /^\d+$/)
  assert.ok(job.waiters >= 1, 'the waiter of the other connection is queued')
  assert.equal(locks[0].key, 'lock:job:1', 'the most waited-for first')
  assert.equal(byKey['exclusive-lock:nightly-report'].api, 'exclusive-lock')
  assert.deepEqual(byKey['exclusive-lock:nightly-report'].contents, { lock_contents: 'host-a' })
  assert.equal(byKey['MAESTRO-LOCK-orders'].api, 'maestro')
  const report = byKey['syncguard:report:daily']
  assert.equal(report.api, 'syncguard')
  assert.equal(report.holder, `${syncguard.lockId.slice(0, 8)}…`)
  assert.equal(report.fence, syncguard.fence)
  assert.equal(report.contents.key, 'report:daily')
  for (const lock of locks) assert.deepEqual(Object.keys(lock).sort(), ['api', 'contents', 'fence', 'fenceCounter', 'holder', 'key', 'ttlMs', 'waiters'])
})

test('list [pattern] filters by key with SCAN MATCH; the text form is a table', async () => {
  const json = await cli(['list', 'lock:*', '--json'], { env: { REDIS_URL: url } })
  assert.equal(json.code, 0, json.stderr)
  assert.deepEqual(JSON.parse(json.stdout).map((l) => l.key), ['lock:job:1'])
  const text = await cli(['list', '--url', url])
  assert.equal(text.code, 0, text.stderr)
  const [header, ...rows] = text.stdout.trim().split('\n')
  assert.match(header, /^key\s+api\s+holder\s+ttlMs\s+fence\s+counter\s+waiters\s+contents$/)
  assert.equal(rows.length, 4)
  assert.match(rows[0], /^lock:job:1\s+distributed-lock\s+[0-9a-f]{8}…\s+\d+/)
  const none = await cli(['list', 'nothing-here:*', '--url', url])
  assert.equal(none.stdout.trim(), 'no locks')
})

test('list and watch find the locks with SCAN, never KEYS', async (t) => {
  const admin = new Redis(url)
  t.after(() => admin.disconnect())
  const calls = async (command) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(await admin.info('commandstats'))?.[1] ?? 0)
  const [scans, keys] = [await calls('scan'), await calls('keys')]
  assert.equal((await cli(['list', '--json', '--url', url])).code, 0)
  assert.equal((await cli(['watch', '--json', '--count', '1', '--url', url])).code, 0)
  assert.ok((await calls('scan')) >= scans + 2, 'each one scanned')
  assert.equal(await calls('keys'), keys, 'KEYS was sent')
})

test('a key with a hash tag: its siblings named by the core, so it is found and inspected', async () => {
  const handle = await dl.acquire('user:{42}:profile', 60_000)
  const { code, stdout, stderr } = await cli(['list', 'lock:user:*', '--json', '--url', url])
  assert.equal(code, 0, stderr)
  const [lock] = JSON.parse(stdout)
  assert.equal(lock.key, 'lock:user:{42}:profile')
  assert.equal(lock.api, 'distributed-lock')
  assert.match(lock.fenceCounter, /^\d+$/)
  const full = JSON.parse((await cli(['inspect', 'lock:user:{42}:profile', '--json', '--url', url])).stdout)
  assert.equal(full.keys.fence, '{42}\xfffence\xfflock:user:{42}:profile')
  await handle.release()
})

test('inspect: one lock in full, its queue and fence counter', async () => {
  const { code, stdout, stderr } = await cli(['inspect', 'lock:job:1', '--json', '--url', url])
  assert.equal(code, 0, stderr)
  const lock = JSON.parse(stdout)
  assert.equal(lock.api, 'distributed-lock')
  assert.ok(lock.queue.length >= 1)
  assert.match(lock.queue[0].connection, /\S/)
  assert.deepEqual(lock.line, [])
  assert.match(lock.keys.fence, /^\{lock:job:1\}.fence$/)
  const sgLock = JSON.parse((await cli(['inspect', 'syncguard:report:daily', '--json', '--url', url])).stdout)
  assert.equal(sgLock.fence, syncguard.fence)
  assert.equal(sgLock.keys.index, `syncguard:id:${syncguard.lockId}`)
  const text = await cli(['inspect', 'exclusive-lock:nightly-report', '--url', url])
  assert.match(text.stdout, /api:\s+exclusive-lock/)
  assert.match(text.stdout, /contents:\s+\{"lock_contents":"host-a"\}/)
})

test("syncguard waiters of ours (createLock's lock(fn) on a held key): counted in list, queued in inspect", async () => {
  const holder = await sg.createRedisBackend(url).acquire({ key: 'report:hourly', ttlMs: 60_000 })
  assert.equal(holder.ok, true)
  const plain = new Redis({ port: redis.port, lazyConnect: true })
  try {
    const ran = sg.createLock(url)(async () => 'ran', { key: 'report:hourly', ttlMs: 5_000, acquisition: { timeoutMs: 30_000 } })
    // The waiter queues in the lock key's wake queue once its first attempt found it held.
    const queue = Buffer.from('{syncguard:report:hourly}\xffwaiting', 'latin1')
    let queued = 0
    for (let i = 0; i < 400 && queued < 1; i++) {
      queued = await plain.zcard(queue)
      if (queued < 1) await new Promise((r) => setTimeout(r, 25))
    }
    assert.equal(queued, 1, 'the waiter is in the wake queue')
    const listed = await cli(['list', 'syncguard:report:hourly', '--json', '--url', url])
    assert.equal(listed.code, 0, listed.stderr)
    const [lock] = JSON.parse(listed.stdout)
    assert.equal(lock.api, 'syncguard')
    assert.equal(lock.waiters, 1)
    const inspected = await cli(['inspect', 'syncguard:report:hourly', '--json', '--url', url])
    assert.equal(inspected.code, 0, inspected.stderr)
    const full = JSON.parse(inspected.stdout)
    assert.equal(full.waiters, 1)
    assert.equal(full.queue.length, 1)
    const [member] = await plain.zrange(queue, 0, -1)
    assert.equal(full.queue[0].connection, member)
    assert.ok(full.queue[0].since > 0)
    const text = await cli(['inspect', 'syncguard:report:hourly', '--url', url])
    assert.match(text.stdout, /waiters:\s+1\n/)
    assert.match(text.stdout, /queued connection \S+ since \d+/)
    await holder.release()
    assert.equal(await ran, 'ran')
  } finally {
    plain.disconnect()
  }
})

test("list: ExclusiveLock's holder is its owner token cut short, as in inspect", async () => {
  const plain = new Redis({ port: redis.port, lazyConnect: true })
  try {
    const owner = await plain.get(Buffer.from('{exclusive-lock:nightly-report}\xffowner', 'latin1'))
    assert.match(owner, /\S{9,}/)
    const { code, stdout, stderr } = await cli(['list', 'exclusive-lock:*', '--json', '--url', url])
    assert.equal(code, 0, stderr)
    const [lock] = JSON.parse(stdout)
    assert.equal(lock.key, 'exclusive-lock:nightly-report')
    assert.equal(lock.holder, `${owner.slice(0, 8)}…`)
    const full = JSON.parse((await cli(['inspect', 'exclusive-lock:nightly-report', '--json', '--url', url])).stdout)
    assert.equal(full.holder, lock.holder)
    const text = await cli(['list', 'exclusive-lock:*', '--url', url])
    assert.match(text.stdout, new RegExp(`^exclusive-lock:nightly-report\\s+exclusive-lock\\s+${owner.slice(0, 8)}…`, 'm'))
  } finally {
    plain.disconnect()
  }
})

test('inspect of a missing key, or of a key that is no lock of ours: exit 5', async () => {
  for (const key of ['no-such-key', 'unrelated', 'lock:stray']) {
    const { code, stderr, stdout } = await cli(['inspect', key, '--url', url])
    assert.equal(code, 5, `${key}: ${stderr}`)
    assert.equal(stdout, '')
    assert.equal(stderr, `native-redis-lock: no lock of native-redis-lock at "${key}"\n`)
  }
})

test('a reply that looks like a pub/sub message is a push only on a subscribed connection', async () => {
  const address = { host: '127.0.0.1', port: redis.port, shown: 'the test server' }
  const client = await connectServer(address, { timeoutMs: 2000 })
  const subscriber = await connectServer(address, { timeoutMs: 2000 })
  const pushes = []
  client.onPush = subscriber.onPush = (push) => pushes.push(push.map(String))
  try {
    await client.call('ZADD', 'pushlike', 1, 'message', 2, 'x')
    assert.deepEqual((await client.call('ZRANGE', 'pushlike', 0, -1)).map(String), ['message', 'x'])
    assert.deepEqual((await client.call('LRANGE', 'nothing', 0, -1)), [])
    assert.deepEqual(pushes, [])
    await subscriber.call('SUBSCRIBE', 'pushlike-channel')
    await client.call('PUBLISH', 'pushlike-channel', 'hello')
    await until(() => pushes.length, (n) => n === 1)
    assert.deepEqual(pushes, [['message', 'pushlike-channel', 'hello']])
  } finally {
    await client.call('DEL', 'pushlike').catch(() => {})
    client.close()
    subscriber.close()
  }
  // Refused at once, naming the server: a cluster has several.
  await assert.rejects(client.call('PING'), { message: 'Redis connection to the test server is closed' })
})

test('the socket options: a host name is the TLS servername, an IP address never is (DEP0123)', () => {
  assert.deepEqual(socketOptions({ host: 'redis.example.com', port: 6380 }), { host: 'redis.example.com', port: 6380, servername: 'redis.example.com' })
  assert.deepEqual(socketOptions({ host: '10.0.0.7', port: 7001 }), { host: '10.0.0.7', port: 7001 })
  assert.deepEqual(socketOptions({ host: '::1', port: 7001 }), { host: '::1', port: 7001 })
  assert.deepEqual(socketOptions({ path: '/tmp/redis.sock', host: 'ignored' }), { path: '/tmp/redis.sock' })
})

test('rediss:// to an IP address: its certificate checked against the address, with no DEP0123 warning', async () => {
  const certs = makeCerts()
  const server = await startTlsRedis({ certs })
  try {
    const env = { NODE_EXTRA_CA_CERTS: certs.caFile }
    for (const host of ['127.0.0.1', 'localhost']) {
      const { code, stdout, stderr } = await cli(['list', '--json', '--url', `rediss://${host}:${server.port}`], { env })
      assert.equal(code, 0, `${host}: ${stderr}`)
      assert.deepEqual(JSON.parse(stdout), [])
      assert.equal(stderr, '', host)
    }
    const untrusted = await cli(['list', '--url', `rediss://127.0.0.1:${server.port}`])
    assert.equal(untrusted.code, 4, untrusted.stderr)
    assert.match(untrusted.stderr, /^native-redis-lock: cannot reach Redis at rediss:\/\/127\.0\.0\.1:\d+\/?: the server's TLS certificate is not trusted \([A-Z_]+\): pass --cacert <file> with the CA that signed it\n$/)
  } finally {
    await server.close()
    certs.cleanup()
  }
})

test('release without --force is a usage error; with no terminal and no --yes it is refused', async () => {
  const usage = await cli(['release', 'lock:job:1', '--url', url])
  assert.equal(usage.code, 2)
  assert.match(usage.stderr, /pass --force/)
  const refused = await cli(['release', 'lock:job:1', '--force', '--url', url])
  assert.equal(refused.code, 6)
  assert.match(refused.stderr, /pass --yes/)
  assert.equal(await raw('GET', 'lock:job:1'), `$36\r\n${held.token}\r\n`, 'nothing was deleted')
})

test('release --force on a terminal asks; "n" leaves the lock, "y" deletes it and bumps the fence', async () => {
  const lock = new DistributedLock(url)
  const handle = await lock.acquire('lock-asked', 60_000)
  const no = inTerminal(['release', 'lock:lock-asked', '--force', '--url', url])
  await until(no.output, (out) => out.includes('[y/N]'))
  no.child.stdin.write('n\r')
  const refused = await no.done
  assert.equal(refused.code, 6, refused.output)
  assert.match(refused.output, /confirmation refused/)
  assert.equal(await raw('GET', 'lock:lock-asked'), `$36\r\n${handle.token}\r\n`)

  const before = JSON.parse((await cli(['inspect', 'lock:lock-asked', '--json', '--url', url])).stdout)
  const yes = inTerminal(['release', 'lock:lock-asked', '--force', '--url', url])
  await until(yes.output, (out) => out.includes('[y/N]'))
  assert.match(yes.output(), /Delete distributed-lock lock "lock:lock-asked" \(holder [0-9a-f]{8}…, 0 waiting\)/)
  yes.child.stdin.write('y\r')
  const done = await yes.done
  assert.equal(done.code, 0, done.output)
  assert.match(done.output, /released distributed-lock lock "lock:lock-asked" held by [0-9a-f]{8}…: deleted 1 key, fence counter now \d+/)
  const after = Number(/fence counter now (\d+)/.exec(done.output)[1])
  assert.equal(after, Number(before.fenceCounter) + 2)
  // The holder is fenced out: a new holder's fence is above every fence the old one had.
  const next = await lock.acquire('lock-asked', 1000)
  assert.ok(next.fence > handle.fence)
  await assert.rejects(handle.extend(1000))
  await next.release()
})

test('release --force --yes --json: what it deleted, for each API', async () => {
  const lock = new ExclusiveLock({ name: 'to free', cache_connection: url, lock_ttl_ms: 4000, lock_refresh_ms: 1000 })
  lock.on('error', () => {})
  assert.equal(await lock.acquire(), true)
  const ex = await cli(['release', 'exclusive-lock:to-free', '--force', '--yes', '--json', '--url', url])
  assert.equal(ex.code, 0, ex.stderr)
  const result = JSON.parse(ex.stdout)
  assert.equal(result.released, 'exclusive-lock:to-free')
  assert.equal(result.api, 'exclusive-lock')
  assert.match(result.fenceCounter, /^\d+$/)
  assert.ok(result.deletedKeys >= 1)
  assert.equal((await cli(['inspect', 'exclusive-lock:to-free', '--url', url])).code, 5)
  await lock.release()

  const backend = sg.createRedisBackend(url)
  const won = await backend.acquire({ key: 'free-me', ttlMs: 60_000 })
  const sgOut = await cli(['release', 'syncguard:free-me', '--force', '--yes', '--json', '--url', url])
  assert.equal(sgOut.code, 0, sgOut.stderr)
  const freed = JSON.parse(sgOut.stdout)
  assert.equal(freed.deletedKeys, 2, 'the record and its index key')
  assert.equal(freed.fenceCounter, String(Number(won.fence) + 1))
  assert.equal(await sg.owns(backend, won.lockId), false)
  const again = await backend.acquire({ key: 'free-me', ttlMs: 1000 })
  assert.ok(again.fence > won.fence)
  await again.release()
})

test('syncguard through an ioredis client with a keyPrefix: inspect finds its index and fence counter, release --force deletes both and moves the counter', async () => {
  const client = new Redis({ port: redis.port, keyPrefix: 'app:', lazyConnect: true })
  const plain = new Redis({ port: redis.port, lazyConnect: true })
  try {
    const backend = sg.createRedisBackend(client)
    const won = await backend.acquire({ key: 'nightly:export', ttlMs: 60_000 })
    assert.equal(won.ok, true)
    const lockKey = 'app:syncguard:nightly:export'
    // Where the library wrote them, read without the CLI: the fence names the lock key
    // without the client's prefix.
    const index = `app:syncguard:id:${won.lockId}`
    const fence = 'app:syncguard:fence:syncguard:nightly:export'
    assert.equal(await plain.get(index), lockKey)
    assert.equal(await plain.get(fence), String(Number(won.fence)))

    const [listed] = JSON.parse((await cli(['list', 'app:*', '--json', '--url', url])).stdout)
    assert.equal(listed.fenceCounter, String(Number(won.fence)))
    await inspectAndForce(url, (...args) => plain.call(...args), { backend, won, key: 'nightly:export', lockKey, index, fence })
  } finally {
    client.disconnect()
    plain.disconnect()
  }
})

test('release of a key that is no lock: exit 5, nothing deleted', async () => {
  const { code, stderr } = await cli(['release', 'unrelated', '--force', '--yes', '--url', url])
  assert.equal(code, 5, stderr)
  assert.match(await raw('GET', 'unrelated'), /not a lock/)
})

test('no address: a one-line error and exit 3, without connecting anywhere', async () => {
  const { code, stdout, stderr } = await cli(['list'])
  assert.equal(code, 3)
  assert.equal(stdout, '')
  assert.equal(stderr, 'native-redis-lock: no Redis address: pass --url redis://host:port or set REDIS_URL\n')
})

test('a bad URL: exit 3, with the reason and never the password', async () => {
  const cases = [
    ['http://127.0.0.1:1', /unsupported URL scheme "http:"/],
    ['not a url', /is not a URL/],
    ['memory://jobs', /memory:\/\/ lives inside the process/],
    ['redis+cluster://h:1/0', /takes no path or query: a cluster has database 0 only/],
    ['redis://127.0.0.1:1/x', /database \(its path\) must be a number/],
  ]
  for (const [bad, reason] of cases) {
    const { code, stderr } = await cli(['list', '--url', bad])
    assert.equal(code, 3, `${bad}: ${stderr}`)
    assert.match(stderr, reason)
    assert.equal(stderr.trim().split('\n').length, 1)
  }
})

test("a Redlock's nodes (several --url, a JSON array, URLs joined by commas or spaces): each one read, an unreachable one exit 4 without its password; watch refuses them", async () => {
  // Port 1: nothing listens there.
  const nodes = ['redis://:hunter2@127.0.0.1:1', 'redis://:hunter2@127.0.0.1:2']
  const forms = [
    ['--url', nodes[0], '--url', nodes[1]],
    ['--url', JSON.stringify(nodes)],
    ['--url', nodes.join(',')],
    ['--url', nodes.join(' ')],
  ]
  for (const args of forms) {
    const { code, stderr } = await cli(['list', ...args, '--timeout', '500'])
    assert.equal(code, 4, `${args.join(' ')}: ${stderr}`)
    assert.match(stderr, /127\.0\.0\.1:1/)
    assert.equal(stderr.trim().split('\n').length, 1)
    assert.ok(!stderr.includes('hunter2'), stderr)
    // watch reads one address at a time: refused before any connection.
    const watched = await cli(['watch', ...args])
    assert.equal(watched.code, 3, `${args.join(' ')}: ${watched.stderr}`)
    assert.match(watched.stderr, /names several servers \(a Redlock's nodes\?\): watch reads one server, one Sentinel set or one Cluster at a time; run it once per node/)
    assert.ok(!watched.stderr.includes('hunter2'), watched.stderr)
  }
  const env = await cli(['inspect', 'k', '--timeout', '500'], { env: { REDIS_URL: nodes.join(',') } })
  assert.equal(env.code, 4, env.stderr)
  for (const [bad, reason] of [
    [['--url', nodes[0], '--url', nodes[0]], /names one node twice/],
    [['--url', '["redis://127.0.0.1:1", 7]'], /not a JSON array of URLs/],
  ]) {
    const { code, stderr } = await cli(['list', ...bad])
    assert.equal(code, 3, stderr)
    assert.match(stderr, reason)
    assert.ok(!stderr.includes('hunter2'), stderr)
  }
  // One Sentinel set or one Cluster, each of several hosts, is one address.
  const sentinel = await cli(['list', '--url', 'redis+sentinel://127.0.0.1:1,127.0.0.1:2/m', '--timeout', '300'])
  assert.equal(sentinel.code, 4, sentinel.stderr)
})

test("a Redlock's lock over three servers: list shows it on each node, inspect each node's, release --force frees it on every node", async (t) => {
  const servers = await Promise.all([startRedis(), startRedis(), startRedis()])
  t.after(() => Promise.all(servers.map((server) => server.stop())))
  const urls = servers.map((server) => server.url)
  const redlock = new DistributedLock(urls)
  const handle = await redlock.acquire('rl:job', 60_000)
  t.after(() => handle.release().catch(() => {}))
  const args = urls.flatMap((u) => ['--url', u])
  for (const form of [args, ['--url', JSON.stringify(urls)], ['--url', urls.join(',')]]) {
    const { code, stdout, stderr } = await cli(['list', 'lock:rl:*', '--json', ...form])
    assert.equal(code, 0, stderr)
    const rows = JSON.parse(stdout)
    assert.deepEqual(rows.map((row) => [row.key, row.api, row.node]), urls.map((u) => ['lock:rl:job', 'distributed-lock', new URL(u).href]).sort((a, b) => a[2].localeCompare(b[2])))
    for (const row of rows) {
      assert.equal(row.holder, `${handle.token.slice(0, 8)}…`)
      assert.ok(row.ttlMs > 50_000, stdout)
    }
  }
  const text = await cli(['list', ...args])
  assert.equal(text.code, 0, text.stderr)
  assert.match(text.stdout.split('\n')[0], /\bnode$/)
  const inspected = await cli(['inspect', 'lock:rl:job', '--json', ...args])
  assert.equal(inspected.code, 0, inspected.stderr)
  assert.equal(JSON.parse(inspected.stdout).length, 3)
  const counters = await Promise.all(servers.map((server) => new Redis(server.url)))
  t.after(() => counters.forEach((c) => c.disconnect()))
  const fenceKey = require('../lib/native').lockSiblings(Buffer.from('lock:rl:job')).fence
  const before = await Promise.all(counters.map((c) => c.get(fenceKey)))
  const released = await cli(['release', 'lock:rl:job', '--force', '--yes', '--json', ...args])
  assert.equal(released.code, 0, released.stderr)
  const result = JSON.parse(released.stdout)
  assert.equal(result.released, 'lock:rl:job')
  assert.equal(result.nodes.length, 3)
  for (const [i, c] of counters.entries()) {
    assert.equal(await c.exists('lock:rl:job'), 0, `node ${i}`)
    assert.equal(Number(await c.get(fenceKey)), Number(before[i]) + 2, `node ${i}: the fence moved on`)
  }
  assert.deepEqual(result.nodes.map((n) => n.deletedKeys), [1, 1, 1])
  // Gone from every node now: exit 5.
  const again = await cli(['inspect', 'lock:rl:job', ...args])
  assert.equal(again.code, 5, again.stderr)
  assert.match(again.stderr, /on any of 3 nodes/)
  // Without --yes and no terminal: refused, nothing asked of the nodes' locks.
  const handle2 = await redlock.acquire('rl:other', 60_000)
  t.after(() => handle2.release().catch(() => {}))
  const refusedRun = await cli(['release', 'lock:rl:other', '--force', ...args])
  assert.equal(refusedRun.code, 6, refusedRun.stderr)
  assert.equal(await redlock.isLocked('rl:other'), true)
})

test('a database that is no number names the argument and never quotes it: it may be a piece of a password', async () => {
  // An unencoded '/' in a password ends the authority: `redis://u:p@h:1/w0rd` has path `w0rd`.
  const cases = [
    [`redis://127.0.0.1:${redis.port}/s3cret-w0rd`, /^native-redis-lock: the URL's database \(its path\) must be a number; percent-encode '\/' in a user name or password\n$/],
    ['unix:///tmp/redis.sock?db=s3cret-w0rd', /^native-redis-lock: the URL's database \(its db parameter\) must be a number\n$/],
  ]
  for (const [bad, message] of cases) {
    const { code, stdout, stderr } = await cli(['list', '--url', bad])
    assert.equal(code, 3, `${bad}: ${stderr}`)
    assert.equal(stdout, '')
    assert.match(stderr, message)
    assert.doesNotMatch(stderr, /s3cret|w0rd/)
  }
})

test('a Sentinel URL whose unencoded password splits into hosts, path or query: exit 3, no piece of it quoted', async () => {
  const cases = [
    // '?' ends the host list: read as host `app:pa`, query `ss@s1/m`.
    ['redis+sentinel://app:pa?ss@s1/m', /sentinel 1 \(of the host list\) is not host:port; percent-encode/, ['app:pa', 'pa?ss', 'ss@']],
    // '/' ends the host list: read as host `app:pa`, master `ss@s1`.
    ['redis+sentinel://s0,app:pa/ss@s1/m', /sentinel 2 \(of the host list\) is not host:port/, ['app:pa', 'ss@s1']],
    // '&' in a sentinel password: read as a parameter `cret`.
    ['redis+sentinel://s1/m?sentinelPassword=se&cret', /sentinelUsername and sentinelPassword only in its query/, ['cret']],
    // '/' in a password after the master: read as the database.
    ['redis+sentinel://s1/m/se:cret', /database must be a number \(it follows the master's name\)/, ['cret']],
  ]
  for (const [bad, reason, secrets] of cases) {
    const { code, stderr } = await cli(['list', '--url', bad])
    assert.equal(code, 3, `${bad}: ${stderr}`)
    assert.match(stderr, reason)
    for (const secret of secrets) assert.ok(!stderr.includes(secret), `${bad}: ${stderr}`)
    assert.equal(stderr.trim().split('\n').length, 1)
  }
})

test('an unreachable or refusing Redis: exit 4, one line, no password', async () => {
  const port = await freePort()
  const down = await cli(['inspect', 'lock:x', '--url', `redis://127.0.0.1:${port}`])
  assert.equal(down.code, 4)
  assert.match(down.stderr, new RegExp(`^native-redis-lock: cannot reach Redis at redis://127.0.0.1:${port}: ECONNREFUSED\\n$`))
  const wrong = await cli(['list', '--url', `redis://:s3cret-pw@127.0.0.1:${redis.port}`])
  assert.equal(wrong.code, 4)
  assert.match(wrong.stderr, /refused the connection/)
  assert.doesNotMatch(wrong.stderr, /s3cret-pw/)
  assert.match(wrong.stderr, /redis:\/\/:\*\*\*@127\.0\.0\.1/)
})

test('a server that answers something other than RESP (an HTTP port): exit 4, one line, no stack', async () => {
  const http = await startHttpLike()
  try {
    const { code, stdout, stderr } = await cli(['list', '--url', `redis://127.0.0.1:${http.port}`])
    assert.equal(code, 4, stderr)
    assert.equal(stdout, '')
    assert.match(stderr, /^native-redis-lock: redis:\/\/127\.0\.0\.1:\d+ answered with something other than RESP: not a Redis server\n$/)
  } finally {
    await http.close()
  }
})

test('a server whose length or integer fields are no numbers: exit 4, one line, no crash or hang', async () => {
  const replies = ['$abc\r\n', '*x\r\n', ':1e3\r\n', '$-7\r\n', '*-2\r\n', '$3\r\nabcdef\r\n', '$\r\n', `$${2 ** 40}\r\n`]
  for (const reply of replies) {
    const server = await startAnswering(reply)
    try {
      const started = Date.now()
      const { code, stdout, stderr } = await cli(['list', '--timeout', '8000', '--url', `redis://127.0.0.1:${server.port}`])
      assert.equal(code, 4, `${JSON.stringify(reply)}: ${stderr}`)
      assert.equal(stdout, '')
      assert.match(stderr, /^native-redis-lock: redis:\/\/127\.0\.0\.1:\d+ answered with something other than RESP: not a Redis server\n$/, JSON.stringify(reply))
      assert.ok(Date.now() - started < 6000, `${JSON.stringify(reply)}: refused at once, not at the timeout`)
    } finally {
      await server.close()
    }
  }
})

test('a server that accepts and never answers: exit 4 within --timeout', async () => {
  const silent = net.createServer(() => {})
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve))
  try {
    const { code, stderr } = await cli(['list', '--timeout', '300', '--url', `redis://127.0.0.1:${silent.address().port}`])
    assert.equal(code, 4, stderr)
    assert.equal(stderr, `native-redis-lock: Redis at redis://127.0.0.1:${silent.address().port} did not answer PING within 300 ms\n`)
  } finally {
    silent.close()
  }
})

test('usage errors: exit 2, one line', async () => {
  const cases = [
    [['frobnicate', '--url', 'redis://h'], /unknown command "frobnicate"/],
    [['inspect', '--url', 'redis://h'], /inspect needs a key/],
    [['list', 'a', 'b', '--url', 'redis://h'], /at most 1 argument/],
    [['list', '--bogus'], /Unknown option '--bogus'/],
    [['list', 'lock:[ab', '--url', url], /unclosed \[/],
    [['list', 'lock:\\', '--url', url], /lone backslash/],
    [['list', '--yes', '--url', url], /--yes is for release only/],
    [['watch', '--interval', 'soon', '--url', url], /--interval must be a whole number/],
    [[], /^Usage: native-redis-lock <command>/],
  ]
  for (const [args, message] of cases) {
    const { code, stderr } = await cli(args)
    assert.equal(code, 2, `${args.join(' ')}: ${stderr}`)
    assert.match(stderr, message)
  }
})

test('--help: the commands and every exit code; each command has its own', async () => {
  const main = await cli(['--help'])
  assert.equal(main.code, 0)
  for (const word of ['list [pattern]', 'inspect <key>', 'watch [pattern]', 'release <key> --force', 'REDIS_URL']) {
    assert.ok(main.stdout.includes(word), word)
  }
  for (const code of ['0 success', '2 usage error', '3 bad or missing URL', '4 Redis unreachable', '5 key not found', '6 confirmation refused']) {
    assert.ok(main.stdout.includes(code), code)
  }
  for (const command of ['list', 'inspect', 'watch', 'release']) {
    const help = await cli([command, '--help'])
    assert.equal(help.code, 0)
    assert.match(help.stdout, new RegExp(`^Usage: native-redis-lock ${command}`))
    assert.match(help.stdout, /--json/)
  }
})
