'use strict'

// `native-redis-lock watch`: the real binary against a private redis-server where two other
// processes contend for one lock. With --json, one line per refresh; in a pseudo-terminal,
// a table redrawn in place with per-second counts, and q restores the terminal.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { startRedis } = require('./helpers/redis-server')
const { cli, inTerminal, running, until } = require('./helpers/cli')
const Redis = require('ioredis')
const { DistributedLock } = require('..')
const sg = require('../syncguard')

let redis
let url
const contenders = []
let quiet
let record

before(async () => {
  redis = await startRedis()
  url = redis.url
  // Two processes on each of DistributedLock's lock:hot, syncguard's syncguard:sg-hot and
  // lock:granted, taken by grants across processes.
  const KEYS = { 'distributed-lock': 'hot', syncguard: 'sg-hot', grants: 'granted', exclusive: 'ex-hot' }
  for (const api of ['distributed-lock', 'distributed-lock', 'syncguard', 'syncguard', 'grants', 'grants', 'exclusive', 'exclusive']) {
    const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'cli-contender.js')], {
      env: { ...process.env, URL: url, KEY: KEYS[api], API: api },
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    contenders.push(child)
  }
  quiet = await new DistributedLock(url).acquire('quiet', 60_000)
  record = await sg.createRedisBackend(url).acquire({ key: 'calm', ttlMs: 60_000 })
  // Each contended lock taken once at least before a watch starts: on a loaded machine the
  // contenders take seconds to load, and a lock first seen in a watch's last frame has no rate.
  const probe = new Redis(url)
  try {
    for (const key of ['lock:hot', 'syncguard:sg-hot', 'lock:granted', 'exclusive-lock:ex-hot']) {
      const fence = require('../lib/native').lockSiblings(Buffer.from(key)).fence
      const deadline = Date.now() + 30_000
      while (!(await probe.exists(key)) && !(await probe.exists(fence)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    }
  } finally {
    probe.disconnect()
  }
})

after(async () => {
  for (const child of contenders) child.kill('SIGKILL')
  await quiet.release()
  await record.release()
  await redis.stop()
})

test('watch --json: one line per refresh, the contended lock first with its rates', async () => {
  // The contenders' wake-ups go to each waiting connection's own channel (one server: README
  // "Guarantees", a dead waiter is skipped), which the watch must not listen on (its
  // subscription would make a dead waiter look alive). What it counts, wake-ups announced on
  // the lock's channel (Cluster, earlier versions), is sent here as such a release sends it.
  const announcer = new Redis(url)
  const announcing = setInterval(() => {
    announcer.spublish('{lock:hot}:released', 'someone').catch(() => {})
  }, 20)
  let run
  try {
    run = await cli(['watch', '--json', '--interval', '500', '--count', '4', '--url', url])
  } finally {
    clearInterval(announcing)
    announcer.disconnect()
  }
  const { code, stdout, stderr } = run
  assert.equal(code, 0, stderr)
  const frames = stdout.trim().split('\n').map((line) => JSON.parse(line))
  assert.equal(frames.length, 4)
  for (const frame of frames) {
    assert.deepEqual(Object.keys(frame), ['at', 'pattern', 'locks'])
    assert.equal(frame.pattern, '*')
    for (const lock of frame.locks) {
      assert.deepEqual(Object.keys(lock), ['key', 'api', 'holder', 'ttlMs', 'waiters', 'acquisitionsPerSec', 'handOversPerSec', 'wakesPerSec'])
    }
  }
  const hot = frames.map((f) => f.locks.find((l) => l.key === 'lock:hot'))
  const since = hot.findIndex(Boolean)
  assert.ok(since >= 0 && since < frames.length - 1, stdout)
  // A rate needs the frame before. Two processes take turns hundreds of times a second: from
  // the second frame the lock shows in, it keeps its row (held or not), first, and busy; the
  // wake-ups announced on its channel are heard.
  for (const frame of frames.slice(since + 1)) {
    const at = (key) => frame.locks.findIndex((l) => l.key === key)
    const row = frame.locks[at('lock:hot')]
    assert.ok(row && at('lock:hot') < at('lock:quiet') && at('lock:hot') < at('syncguard:calm'), `the contended before the calm, and kept while free: ${stdout}`)
    // Each contender holds 5 ms a turn: at most some 200 acquisitions a second, far more
    // than none (the counter's growth, read whatever channel the wake-ups go to).
    assert.ok(row.acquisitionsPerSec > 5 && row.acquisitionsPerSec < 400, stdout)
  }
  assert.ok(hot.slice(since + 1).some((l) => l.wakesPerSec > 0), stdout)
  // syncguard draws one fence per acquisition: its busy lock's rate is read the same way.
  const sgHot = frames.map((f) => f.locks.find((l) => l.key === 'syncguard:sg-hot'))
  const sgSince = sgHot.findIndex(Boolean)
  assert.ok(sgSince >= 0 && sgSince < frames.length - 1, stdout)
  assert.ok(sgHot.slice(sgSince + 1).every((l) => l && l.api === 'syncguard' && l.acquisitionsPerSec > 5 && l.acquisitionsPerSec < 400), stdout)
  // ExclusiveLock's layout (an owner key beside), polled every 2 ms: its failed polls draw no
  // fence (a lock found held is attempted by the script, ops/kept_fences.rs), so its rate is
  // that of acquisitions, as the others'.
  const exHot = frames.map((f) => f.locks.find((l) => l.key === 'exclusive-lock:ex-hot'))
  const exSince = exHot.findIndex(Boolean)
  assert.ok(exSince >= 0 && exSince < frames.length - 1, stdout)
  assert.ok(exHot.slice(exSince + 1).every((l) => l && l.api === 'exclusive-lock' && l.acquisitionsPerSec > 5 && l.acquisitionsPerSec < 400), stdout)
  // Grants draw 1024 fences each: read as one acquisition each, not as 512.
  const granted = frames.map((f) => f.locks.find((l) => l.key === 'lock:granted'))
  const grantedSince = granted.findIndex(Boolean)
  assert.ok(grantedSince >= 0 && grantedSince < frames.length - 1, stdout)
  assert.ok(granted.slice(grantedSince + 1).every((l) => l && l.acquisitionsPerSec > 5 && l.acquisitionsPerSec < 400), stdout)
  const calm = frames.slice(1).map((f) => f.locks.find((l) => l.key === 'syncguard:calm'))
  assert.ok(calm.every((l) => l && l.acquisitionsPerSec === 0 && l.wakesPerSec === 0), stdout)
})

test('watch --json: a lock held by one holder and polled by others reads 0 acquisitions a second', async () => {
  const { ExclusiveLock } = require('..')
  const holder = await new DistributedLock(url).acquire('polled', 60_000)
  const poller = new DistributedLock(url, { stats: false })
  const exSettings = { name: 'ex-polled', cache_connection: url, lock_ttl_ms: 60_000, lock_refresh_ms: 20_000 }
  const exHolder = new ExclusiveLock(exSettings)
  const exPoller = new ExclusiveLock(exSettings)
  assert.equal(await exHolder.acquire(), true)
  let polling = true
  let polls = 0
  const poll = (async () => {
    while (polling) {
      // tryAcquire, acquire without retries and ExclusiveLock's acquire(): one attempt each.
      assert.equal(await poller.tryAcquire('polled', 5_000), null)
      await assert.rejects(poller.acquire('polled', 5_000, { maxRetries: 0 }), { code: 'ELOCKED' })
      assert.equal(await exPoller.acquire(), false)
      polls++
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })()
  let run
  try {
    run = await cli(['watch', '*polled*', '--json', '--interval', '500', '--count', '4', '--url', url])
  } finally {
    polling = false
    await poll
    await holder.release()
    await exHolder.release()
  }
  const { code, stdout, stderr } = run
  assert.equal(code, 0, stderr)
  assert.ok(polls >= 20, `${polls} polls`)
  const frames = stdout.trim().split('\n').map((line) => JSON.parse(line))
  assert.equal(frames.length, 4)
  // A rate needs the frame before: from the second on, each lock's counter stood still
  // through hundreds of failed attempts (only a first attempt, before any was seen held, is
  // written as the transaction, which draws two whatever it finds).
  for (const frame of frames.slice(1)) {
    const rows = Object.fromEntries(frame.locks.map((l) => [l.key, l]))
    assert.deepEqual(Object.keys(rows).sort(), ['exclusive-lock:ex-polled', 'lock:polled'], stdout)
    for (const row of Object.values(rows)) assert.equal(row.acquisitionsPerSec, 0, stdout)
  }
})

/** One attempt at `key` by a process of its own (fixtures/cli-attempt.js): whether it won. */
async function attemptIn(api, key) {
  const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'cli-attempt.js')], {
    env: { ...process.env, URL: url, KEY: key, API: api },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (chunk) => { out += chunk })
  const code = await new Promise((resolve) => child.on('close', resolve))
  assert.equal(code, 0, out)
  return JSON.parse(out).won
}

/** A lock's fence counter and its count of fences drawn in vain (count_missed.lua). */
async function drawn(admin, key) {
  const sib = require('../lib/native').lockSiblings(Buffer.from(key))
  const [fence, missed] = await Promise.all([admin.get(sib.fence), admin.get(sib.missed)])
  return { fence: Number(fence ?? 0), missed: Number(missed ?? 0) }
}

/** Every whole line a `watch --json` printed so far, read. */
function framesOf(run) {
  return run.output().split('\n').slice(0, -1).map((line) => JSON.parse(line))
}

test('watch --json: new processes failing once each at a held lock read 0 acquisitions a second', async () => {
  const { ExclusiveLock } = require('..')
  const admin = new Redis(url)
  const holder = await new DistributedLock(url).acquire('phantom', 60_000)
  const exHolder = new ExclusiveLock({ name: 'ex-phantom', cache_connection: url, lock_ttl_ms: 60_000, lock_refresh_ms: 20_000 })
  assert.equal(await exHolder.acquire(), true)
  const keys = ['exclusive-lock:ex-phantom', 'lock:phantom']
  const run = running(['watch', '*phantom*', '--json', '--interval', '300', '--url', url])
  try {
    await until(() => framesOf(run), (frames) => frames.length >= 1)
    const before = await Promise.all(keys.map((key) => drawn(admin, key)))
    // Each a process of its own, that never saw the lock held: its one attempt is the
    // transaction, which draws two fences whatever it finds.
    for (const [api, key] of [['try', 'phantom'], ['exclusive', 'ex-phantom'], ['try', 'phantom'], ['exclusive', 'ex-phantom'], ['try', 'phantom']]) {
      assert.equal(await attemptIn(api, key), false)
    }
    const after = await Promise.all(keys.map((key) => drawn(admin, key)))
    // Drawn, and counted beside the counter as drawn in vain: 2 and 3 attempts, 2 fences each.
    const grown = after.map((a, i) => [a.fence - before[i].fence, a.missed - before[i].missed])
    assert.deepEqual(grown, [[4, 4], [6, 6]])
    const seen = framesOf(run).length
    await until(() => framesOf(run), (frames) => frames.length >= seen + 2)
  } finally {
    run.child.kill('SIGTERM')
    await holder.release()
    await exHolder.release()
    admin.disconnect()
  }
  const { code, stdout, stderr } = await run.done
  assert.equal(code, 0, stderr)
  const frames = stdout.trim().split('\n').map((line) => JSON.parse(line))
  assert.ok(frames.length >= 4, stdout)
  // A rate needs the frame before: from the second on, both held all along, and no attempt
  // read as an acquisition.
  for (const frame of frames.slice(1)) {
    const rows = Object.fromEntries(frame.locks.map((l) => [l.key, l]))
    assert.deepEqual(Object.keys(rows).sort(), keys, stdout)
    for (const row of Object.values(rows)) assert.equal(row.acquisitionsPerSec, 0, stdout)
  }
})

test('watch --json: acquisitions are counted exactly, with the failed first attempts of new processes among them', async () => {
  const ROUNDS = 2
  const admin = new Redis(url)
  const lock = new DistributedLock(url)
  // Held before the watch starts, so listed from its first frame: not counted.
  let handle = await lock.acquire('counted', 60_000)
  const run = running(['watch', '*counted*', '--json', '--interval', '300', '--url', url])
  let before
  let after
  try {
    await until(() => framesOf(run), (frames) => frames.length >= 1)
    before = await drawn(admin, 'lock:counted')
    for (let round = 0; round < ROUNDS; round++) {
      // While ours: a new process's tryAcquire fails, and a new process's waitForLock fails
      // its first attempt and waits; ours released, the waiter takes the lock (one
      // acquisition) and gives it back, and ours is taken again (another).
      assert.equal(await attemptIn('try', 'counted'), false)
      const missed = (await drawn(admin, 'lock:counted')).missed
      const waiter = attemptIn('wait', 'counted')
      const deadline = Date.now() + 20_000
      while ((await drawn(admin, 'lock:counted')).missed === missed) {
        assert.ok(Date.now() < deadline, 'the waiter never attempted')
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      await handle.release()
      assert.equal(await waiter, true)
      handle = await lock.acquire('counted', 60_000)
    }
    after = await drawn(admin, 'lock:counted')
    const seen = framesOf(run).length
    await until(() => framesOf(run), (frames) => frames.length >= seen + 2)
  } finally {
    run.child.kill('SIGTERM')
    await handle.release()
    admin.disconnect()
  }
  const { code, stdout, stderr } = await run.done
  assert.equal(code, 0, stderr)
  // Per round two acquisitions (4 fences) and two first attempts that found the lock held
  // (4 fences more, counted as drawn in vain).
  assert.deepEqual([after.fence - before.fence, after.missed - before.missed], [8 * ROUNDS, 4 * ROUNDS])
  const frames = stdout.trim().split('\n').map((line) => JSON.parse(line))
  // Each frame's rate over the time since the one before, summed: the acquisitions.
  let acquisitions = 0
  for (let i = 1; i < frames.length; i++) {
    const row = frames[i].locks.find((l) => l.key === 'lock:counted')
    assert.ok(row, stdout)
    acquisitions += (row.acquisitionsPerSec * (Date.parse(frames[i].at) - Date.parse(frames[i - 1].at))) / 1000
  }
  assert.equal(Math.round(acquisitions), 2 * ROUNDS, stdout)
})

test('watch [pattern] shows only the matching locks', async () => {
  const { code, stdout, stderr } = await cli(['watch', 'syncguard:c*', '--json', '--interval', '100', '--count', '2', '--url', url])
  assert.equal(code, 0, stderr)
  for (const line of stdout.trim().split('\n')) {
    assert.deepEqual(JSON.parse(line).locks.map((l) => l.key), ['syncguard:calm'])
  }
})

test('watch in a terminal: redrawn in place, per-second counts, q quits and restores it', async () => {
  const run = inTerminal(['watch', '--interval', '300', '--url', url])
  // Four frames: each starts at the top-left corner of the alternate screen.
  await until(run.output, (out) => out.split('\x1b[H').length > 4)
  run.child.stdin.write('q')
  const { code, output } = await run.done
  assert.equal(code, 0, output)
  assert.ok(output.startsWith('\x1b[?1049h\x1b[?25l'), JSON.stringify(output.slice(0, 40)))
  assert.ok(output.includes('\x1b[?25h\x1b[?1049l'), 'cursor and screen restored')
  assert.ok(output.lastIndexOf('\x1b[?1049l') > output.lastIndexOf('\x1b[H'), 'restored after the last frame')
  const frames = output.split('\x1b[H').slice(1)
  const last = frames[frames.length - 2]
  assert.match(last, /native-redis-lock watch redis:\/\/127\.0\.0\.1:\d+\/? \*/)
  assert.match(last, /key\s+api\s+holder\s+ttlMs\s+waiters\s+acquisitions\/s\s+hand-overs\/s\s+wakes\/s/)
  // A rate needs the frame before: from the second frame the hot lock shows in, it is busy
  // in each one.
  const rows = frames.map((frame) => frame.split(/\r?\n/).find((line) => line.startsWith('lock:hot')))
  const since = rows.findIndex(Boolean)
  assert.ok(since >= 0 && since < frames.length - 1, JSON.stringify(frames))
  for (const row of rows.slice(since + 1)) {
    assert.ok(row, JSON.stringify(frames))
    const [acquisitions] = row.replace(/\x1b\[K/g, '').trim().split(/\s+/).slice(-3).map(Number)
    assert.ok(acquisitions > 0, row)
  }
  assert.match(last, /syncguard:calm\s+syncguard\s+\S+\s+\d+\s+0\s+0\s+0\s+0/)
})

test('watch in a terminal: Ctrl-C quits as q does, and restores it', async () => {
  const run = inTerminal(['watch', '--interval', '300', '--url', url])
  await until(run.output, (out) => out.split('\x1b[H').length > 2)
  run.child.stdin.write('\x03')
  // Bounded: a watch deaf to Ctrl-C would otherwise hang the file.
  let timer
  const late = new Promise((resolve) => { timer = setTimeout(resolve, 10_000, null) })
  const ended = await Promise.race([run.done, late])
  clearTimeout(timer)
  if (ended === null) run.child.kill('SIGKILL')
  assert.ok(ended, `still running 10 s after Ctrl-C: ${JSON.stringify(run.output().slice(-200))}`)
  const { code, output } = ended
  assert.equal(code, 0, output)
  assert.ok(output.lastIndexOf('\x1b[?25h\x1b[?1049l') > output.lastIndexOf('\x1b[H'), 'cursor and screen restored after the last frame')
})

test('watch against an unreachable Redis: exit 4 and the terminal untouched', async () => {
  const { code, stdout, stderr } = await cli(['watch', '--url', 'redis://127.0.0.1:1', '--count', '1'])
  assert.equal(code, 4)
  assert.equal(stdout, '')
  assert.match(stderr, /cannot reach Redis/)
})
