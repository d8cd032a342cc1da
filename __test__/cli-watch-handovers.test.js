'use strict'

// `native-redis-lock watch`'s hand-overs/s and wakes/s (issue 27): counted by the contending
// processes themselves, which answer the watch's request each frame, against a private
// redis-server. One process takes lock:hot with two waiters of its own, each resting after its
// turn (a release hands the lock to the other, within the process, which Redis never sees, or
// finding it resting wakes another process), two others wait on it alone (woken by releases).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { startRedis } = require('./helpers/redis-server')
const { startChild, killAll } = require('./helpers/child')
const { cli } = require('./helpers/cli')
const Redis = require('ioredis')
const { DistributedLock } = require('..')

let redis
const children = new Set()
let quiet

before(async () => {
  redis = await startRedis()
  const fixture = path.join(__dirname, 'fixtures', 'watch-contender.js')
  const kids = [[2, 10], [1, 0], [1, 0]].map(([loops, pause]) =>
    startChild(fixture, { URL: redis.url, KEY: 'hot', LOOPS: String(loops), PAUSE: String(pause) }, children))
  await Promise.all(kids.map((kid) => kid.ready))
  quiet = await new DistributedLock(redis.url).acquire('quiet', 60_000)
  // The contenders at work before the watch starts (they take a while to load).
  const probe = new Redis(redis.url)
  try {
    const deadline = Date.now() + 30_000
    while (!(await probe.exists('lock:hot')) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  } finally {
    probe.disconnect()
  }
})

after(async () => {
  killAll(children)
  await quiet.release()
  await redis.stop()
})

test('watch --json: hand-overs and wake-ups per second of a contended lock, as its processes count them', async () => {
  const { code, stdout, stderr } = await cli(['watch', '--json', '--interval', '500', '--count', '6', '--url', redis.url])
  assert.equal(code, 0, stderr)
  const frames = stdout.trim().split('\n').map((line) => JSON.parse(line))
  assert.equal(frames.length, 6)
  for (const frame of frames) {
    for (const lock of frame.locks) {
      assert.deepEqual(Object.keys(lock), ['key', 'api', 'holder', 'ttlMs', 'waiters', 'acquisitionsPerSec', 'handOversPerSec', 'wakesPerSec'])
    }
  }
  // The first frame asks the processes to start counting: rates from the second on.
  const hot = frames.slice(1).map((f) => f.locks.find((l) => l.key === 'lock:hot')).filter(Boolean)
  assert.ok(hot.some((l) => l.handOversPerSec > 0), stdout)
  assert.ok(hot.some((l) => l.wakesPerSec > 0), stdout)
  const calm = frames.map((f) => f.locks.find((l) => l.key === 'lock:quiet'))
  assert.ok(calm.every((l) => l && l.handOversPerSec === 0 && l.wakesPerSec === 0), stdout)
  // The most contended first.
  for (const frame of frames.slice(2)) {
    const at = (key) => frame.locks.findIndex((l) => l.key === key)
    if (at('lock:hot') >= 0) assert.ok(at('lock:hot') < at('lock:quiet'), stdout)
  }
})

test('watch: the table has the hand-overs/s column, and --help says who answers', async () => {
  const { code, stdout, stderr } = await cli(['watch', '--interval', '300', '--count', '2', '--url', redis.url])
  assert.equal(code, 0, stderr)
  assert.match(stdout, /key\s+api\s+holder\s+ttlMs\s+waiters\s+acquisitions\/s\s+hand-overs\/s\s+wakes\/s/)
  const help = await cli(['watch', '--help'])
  assert.match(help.stdout, /hand-overs per second/)
  assert.match(help.stdout, /only\s+processes running this version/)
})

test('watch: a user the ACL keeps from asking our processes still gets its table, - in their two columns, told once', async () => {
  const admin = new Redis(redis.url)
  try {
    // One may not PUBLISH the request; the other may use no channel at all.
    await admin.call('ACL', 'SETUSER', 'nopublish', 'on', '>pw', '~*', '&*', '+@all', '-publish')
    await admin.call('ACL', 'SETUSER', 'nochannels', 'on', '>pw', '~*', 'resetchannels', '+@all')
  } finally {
    admin.disconnect()
  }
  const { port } = new URL(redis.url)
  for (const user of ['nopublish', 'nochannels']) {
    const url = `redis://${user}:pw@127.0.0.1:${port}`
    const table = await cli(['watch', '--interval', '300', '--count', '3', '--url', url])
    assert.equal(table.code, 0, `${user}: ${table.stderr}`)
    const quietRow = table.stdout.split('\n').find((line) => line.startsWith('lock:quiet'))
    assert.match(quietRow ?? '', /\s-\s+-$/, `${user}: ${table.stdout}`)
    assert.equal(table.stderr.match(/ACL refuses/g)?.length, 1, `${user}: ${table.stderr}`)
    const json = await cli(['watch', '--json', '--interval', '300', '--count', '2', '--url', url])
    assert.equal(json.code, 0, `${user}: ${json.stderr}`)
    const frames = json.stdout.trim().split('\n').map((line) => JSON.parse(line))
    const quiet = frames.at(-1).locks.find((l) => l.key === 'lock:quiet')
    assert.equal(quiet.handOversPerSec, null, json.stdout)
    assert.equal(quiet.wakesPerSec, null, json.stdout)
  }
})

test("a Redis server's answer holds its own locks' counts, never those of memory:// locks of the same process", async () => {
  const channel = require('../lib/native').watchChannel()
  const replyTo = `native-redis-lock:watch:reply:memory-${process.pid}`
  const onRedis = new DistributedLock(redis.url)
  const inMemory = new DistributedLock('memory://')
  const listener = new Redis(redis.url)
  const publisher = new Redis(redis.url)
  const answers = []
  listener.on('message', (_, payload) => answers.push(JSON.parse(payload)))
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
  const ask = async (id) => {
    await publisher.publish(channel, `1\n${id}\n${replyTo}\n`)
    const deadline = Date.now() + 10_000
    while (!answers.some((a) => a.id === id && a.pid === process.pid) && Date.now() < deadline) await sleep(20)
    return answers.find((a) => a.id === id && a.pid === process.pid)
  }
  /** A waiter woken (or handed the lock) by each of `turns` releases of `key` on `lock`. */
  const contend = async (lock, key, turns) => {
    for (let n = 0; n < turns; n++) {
      const held = await lock.acquire(key, 5_000)
      const waiting = lock.waitForLock(key, 5_000, 5_000)
      await sleep(30)
      await held.release()
      await (await waiting).release()
    }
  }
  try {
    await listener.subscribe(replyTo)
    // A waiter on the server: its connection subscribes to the requests with it.
    await contend(onRedis, 'own', 1)
    assert.ok(await ask('memory-1'), 'no answer from this process')
    await contend(inMemory, 'mem', 3)
    await contend(onRedis, 'own', 3)
    const answer = await ask('memory-2')
    const keys = answer.keys.map(([key]) => key)
    assert.ok(keys.includes('lock:own'), JSON.stringify(answer))
    assert.ok(!keys.includes('lock:mem'), `memory:// counted into the server's answer: ${JSON.stringify(answer)}`)
  } finally {
    listener.disconnect()
    publisher.disconnect()
  }
})

test('NATIVE_REDIS_LOCK_WATCH=off: a waiting process never answers; a value other than on/off fails its constructors', async () => {
  const fixture = path.join(__dirname, 'fixtures', 'watch-contender.js')
  const off = startChild(fixture, { URL: redis.url, KEY: 'hidden', LOOPS: '2', PAUSE: '0', NATIVE_REDIS_LOCK_WATCH: 'off' }, children)
  const on = startChild(fixture, { URL: redis.url, KEY: 'shown', LOOPS: '2', PAUSE: '0' }, children)
  await Promise.all([off.ready, on.ready])
  const channel = require('../lib/native').watchChannel()
  const replyTo = `native-redis-lock:watch:reply:off-${process.pid}`
  const listener = new Redis(redis.url)
  const publisher = new Redis(redis.url)
  const answers = []
  listener.on('message', (_, payload) => answers.push(JSON.parse(payload)))
  try {
    await listener.subscribe(replyTo)
    const deadline = Date.now() + 15_000
    for (let n = 0; !answers.some((a) => a.pid === on.proc.pid) && Date.now() < deadline; n++) {
      await publisher.publish(channel, `1\noff-${n}\n${replyTo}\n`)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    assert.ok(answers.some((a) => a.pid === on.proc.pid), 'the process left on never answered')
    assert.ok(!answers.some((a) => a.pid === off.proc.pid), JSON.stringify(answers))
  } finally {
    listener.disconnect()
    publisher.disconnect()
    process.kill(off.proc.pid, 'SIGKILL')
    process.kill(on.proc.pid, 'SIGKILL')
  }
  const bad = startChild(fixture, { URL: redis.url, KEY: 'bad', LOOPS: '1', PAUSE: '0', NATIVE_REDIS_LOCK_WATCH: 'maybe' }, children)
  await assert.rejects(bad.ready)
  const stderr = bad.proc.stderr
  await new Promise((resolve) => (stderr.readableEnded ? resolve() : stderr.once('end', resolve)))
  assert.match(bad.stderr, /NATIVE_REDIS_LOCK_WATCH must be "on" or "off", got "maybe"/)
})

test("a connection the ACL refuses the control channel asks once, and its waiters are woken as before", async () => {
  const admin = new Redis(redis.url)
  try {
    await admin.call('ACL', 'SETUSER', 'lockonly', 'on', '>pw', '~*', '&{lock:*', '+@all')
    const { port } = new URL(redis.url)
    const url = `redis://lockonly:pw@127.0.0.1:${port}`
    const holder = new DistributedLock(url)
    const waiter = new DistributedLock(url, { retryDelayMs: 10_000 })
    for (let n = 0; n < 4; n++) {
      const held = await holder.acquire(`acl-${n}`, 5_000)
      const waiting = waiter.waitForLock(`acl-${n}`, 5_000, 5_000)
      await new Promise((resolve) => setTimeout(resolve, 50))
      const released = Date.now()
      await held.release()
      await (await waiting).release()
      // Woken by the release, not by its 10 s poll.
      assert.ok(Date.now() - released < 2_000, `wait ${n} was not woken`)
    }
    // Long enough for a retry to have gone (earlier, one went 0.2 s and 2 s after the first).
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    const log = await admin.call('ACL', 'LOG')
    const entries = log.map((entry) => {
      const fields = {}
      for (let i = 0; i < entry.length; i += 2) fields[entry[i]] = entry[i + 1]
      return fields
    })
    const refused = entries.filter((e) => e.username === 'lockonly' && e.object === 'native-redis-lock:watch')
    assert.equal(refused.length, 1, JSON.stringify(entries))
    assert.equal(Number(refused[0].count), 1, `the refused SUBSCRIBE was sent again: ${JSON.stringify(refused)}`)
  } finally {
    admin.disconnect()
  }
})

test('a Redlock answers a request on the node that heard it only, once', async (t) => {
  const nodes = await Promise.all([0, 1, 2].map(() => startRedis()))
  t.after(() => Promise.all(nodes.map((node) => node.stop())))
  const lock = new DistributedLock(nodes.map((node) => node.url), { retryDelayMs: 10_000 })
  // A waiter subscribes on every node it waits through.
  const held = await lock.acquire('quorum', 5_000)
  const waiting = lock.waitForLock('quorum', 5_000, 5_000)
  await new Promise((resolve) => setTimeout(resolve, 100))
  await held.release()
  await (await waiting).release()
  const channel = require('../lib/native').watchChannel()
  const replyTo = `native-redis-lock:watch:reply:redlock-${process.pid}`
  const heard = nodes.map(() => [])
  const listeners = nodes.map((node, n) => {
    const listener = new Redis(node.url)
    listener.on('message', (_, payload) => heard[n].push(JSON.parse(payload)))
    return listener
  })
  const publisher = new Redis(nodes[1].url)
  try {
    await Promise.all(listeners.map((listener) => listener.subscribe(replyTo)))
    await publisher.publish(channel, `1\nredlock-1\n${replyTo}\n`)
    const deadline = Date.now() + 10_000
    while (heard[1].length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal(heard[1].filter((a) => a.pid === process.pid).length, 1, JSON.stringify(heard))
    assert.deepEqual([heard[0].length, heard[2].length], [0, 0], `answered on nodes that did not ask: ${JSON.stringify(heard)}`)
  } finally {
    for (const listener of listeners) listener.disconnect()
    publisher.disconnect()
  }
})
