'use strict'

// The JS-thread connection (src/binding/js/socket): the one-round-trip calls go over a socket
// driven by the JS thread's own loop. What it must keep from the tokio path: a broken
// connection loses no call (each goes again through tokio), a silent server bounds every call
// and a lock won after its caller gave up is freed, Redis errors read as they always did, and
// a worker thread that ends takes its connection with it.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Worker } = require('node:worker_threads')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const direct = require('./helpers/direct')
const { DistributedLock } = require('..')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let server
let admin

before(async () => {
  server = await startRedis()
  admin = await direct.adminOf(server)
})

after(async () => {
  admin?.disconnect()
  await server?.close()
  assert.deepEqual(unhandled, [])
})

test('calls go over the JS-thread connection once it is open', async () => {
  const lock = new DistributedLock(server.url)
  await direct.withDirect(lock, admin)
  const before = await admin.info('commandstats')
  const calls = (info, command) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
  const [id] = await direct.directConnections(admin)
  const handle = await lock.acquire('direct:used', 5000)
  assert.equal(await lock.isLocked('direct:used'), true)
  await handle.release()
  assert.equal(await lock.isLocked('direct:used'), false)
  const after = await admin.info('commandstats')
  // The acquire went as one MULTI ... EXEC transaction, the release as the script.
  assert.equal(calls(after, 'exec') - calls(before, 'exec'), 1)
  assert.equal(calls(after, 'evalsha') - calls(before, 'evalsha'), 1)
  // The same connection served them: its command counter moved.
  const line = (await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `))
  assert.match(line, /cmd=(evalsha|exists)/)
})

test('extend goes over the JS-thread connection too, and a connection killed under it is not sent twice', async () => {
  const lock = new DistributedLock(server.url)
  await direct.withDirect(lock, admin)
  const [id] = await direct.directConnections(admin)
  const addr = /addr=(\S+)/.exec((await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `)))[1]
  const handle = await lock.acquire('direct:extend', 5000)
  // The first extend may meet NOSCRIPT there, which sends it again through the runtime.
  await handle.extend(1)
  const monitor = await admin.duplicate().monitor()
  const seen = []
  monitor.on('monitor', (_time, args, source) => seen.push({ args, source }))
  const before = handle.info.expiresAt
  try {
    await handle.extend(20_000)
    const pttl = await admin.pttl('lock:direct:extend')
    assert.ok(pttl > 20_000 && pttl <= 25_000, `PTTL ${pttl}`)
    assert.ok(handle.info.expiresAt > before + 15_000, `expiresAt ${handle.info.expiresAt} after ${before}`)
    await sleep(50)
  } finally {
    monitor.disconnect()
  }
  const extends_ = seen.filter(({ args }) => /^evalsha$/i.test(args[0]) && args.includes('lock:direct:extend'))
  assert.equal(extends_.length, 1, JSON.stringify(seen))
  assert.equal(extends_[0].source, addr)
  // Killed under the extend: rejected, never sent twice (the TTL grows by 20 s at most).
  const [now] = await direct.directConnections(admin)
  const extending = handle.extend(20_000).then(
    () => 'extended',
    (err) => err,
  )
  await admin.client('KILL', 'ID', now)
  const outcome = await extending
  const after = await admin.pttl('lock:direct:extend')
  assert.ok(after <= 45_000, `PTTL ${after}: extended twice`)
  if (outcome !== 'extended') assert.equal(outcome.code, 'ECONNECTION', String(outcome))
  await handle.release()
  assert.equal(await lock.isLocked('direct:extend'), false)
})

test('a release hands the lock to a waiter of the same thread over that connection', async () => {
  const lock = new DistributedLock(server.url)
  await direct.withDirect(lock, admin)
  const [id] = await direct.directConnections(admin)
  const holder = await lock.acquire('direct:handed', 10_000)
  const waiting = lock.waitForLock('direct:handed', 5000, 10_000)
  await sleep(50) // the waiter is queued, and has made its one attempt
  const before = await admin.info('commandstats')
  const evalshas = (info) => Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0)
  const released = holder.release()
  const handle = await waiting
  await released
  assert.equal(holder.isHeld, false)
  assert.equal(handle.isHeld, true)
  assert.equal(await admin.get('lock:direct:handed'), handle.token)
  assert.ok(handle.fence > holder.fence)
  // One script handed it over (no delete, no attempt of the waiter's), on the JS-thread
  // connection.
  assert.equal(evalshas(await admin.info('commandstats')) - evalshas(before), 1)
  const line = (await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `))
  assert.match(line, /cmd=evalsha/)
  await handle.release()
  assert.equal(await admin.exists('lock:direct:handed'), 0)
})

test('waitForLock on a free key is one attempt over the JS-thread connection', async () => {
  const lock = new DistributedLock(server.url)
  await direct.withDirect(lock, admin)
  const [id] = await direct.directConnections(admin)
  const calls = (info, command) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
  const before = await admin.info('commandstats')
  const handle = await lock.waitForLock('direct:wait-free', 5000, 5000)
  const after = await admin.info('commandstats')
  assert.equal(await admin.get('lock:direct:wait-free'), handle.token)
  // One transaction, the very one acquire sends, and nothing else: no PTTL (only a held
  // lock needs its TTL, and queueing tells it), no script, no subscription, no queueing, no
  // second attempt.
  assert.equal(calls(after, 'exec') - calls(before, 'exec'), 1)
  assert.equal(calls(after, 'pttl') - calls(before, 'pttl'), 0)
  assert.equal(calls(after, 'set') - calls(before, 'set'), 1)
  assert.equal(calls(after, 'incrby') - calls(before, 'incrby'), 1)
  assert.equal(calls(after, 'evalsha') - calls(before, 'evalsha'), 0)
  assert.equal(calls(after, 'subscribe') - calls(before, 'subscribe'), 0)
  const line = (await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `))
  assert.match(line, /cmd=exec/)
  await handle.release()
  assert.equal(await admin.exists('lock:direct:wait-free'), 0)
})

test('waitForLock that finds the key held there goes on waiting: woken by a release, or when the TTL runs out', async () => {
  const lock = new DistributedLock(server.url)
  const other = new DistributedLock(server.url)
  await direct.withDirect(lock, admin)
  // Held by another instance (no hand-over between them): the waiter is woken by the release.
  const holder = await other.acquire('direct:wait-held', 10_000)
  const waiting = lock.waitForLock('direct:wait-held', 5000, 10_000)
  await sleep(100)
  const released = Date.now()
  await holder.release()
  const handle = await waiting
  assert.ok(Date.now() - released < 1000, 'woken by the release, not by a poll')
  assert.equal(await admin.get('lock:direct:wait-held'), handle.token)
  assert.ok(BigInt(handle.fence) > BigInt(holder.fence))
  await handle.release()
  // A holder that never releases: the first pause ends with its TTL, not after the poll delay.
  const slow = new DistributedLock(server.url, { retryDelayMs: 5000 })
  await direct.withDirect(slow, admin)
  await admin.set('lock:direct:wait-ttl', 'someone-else', 'PX', 300)
  const started = Date.now()
  const late = await slow.waitForLock('direct:wait-ttl', 4000, 5000)
  assert.ok(Date.now() - started < 2000, `waited ${Date.now() - started} ms for a 300 ms TTL`)
  assert.equal(await admin.get('lock:direct:wait-ttl'), late.token)
  await late.release()
  // Not won within the timeout: rejected as before, naming the key.
  const blocker = await other.acquire('direct:wait-timeout', 10_000)
  await assert.rejects(lock.waitForLock('direct:wait-timeout', 200, 1000), (err) => err.name === 'LockAcquisitionError')
  await blocker.release()
})

test('a release of the same thread made behind a waiter\'s first attempt still reaches that waiter at once', async () => {
  // No RESP3 here, so no wake-up by message: nothing but the release itself can tell the
  // waiter, whose first attempt (on a free-looking key it has not queued for) is in flight
  // when the release is sent, and whose next poll is seconds away.
  const plain = await startRedis({ args: ['--rename-command', 'HELLO', ''] })
  const plainAdmin = new Redis(plain.port, { lazyConnect: true })
  try {
    await plainAdmin.connect()
    await plainAdmin.client('SETNAME', 'test-admin')
    const lock = new DistributedLock(plain.url, { retryDelayMs: 5000 })
    // Ours there: the tokio connection and, once open, the JS-thread one (both RESP2).
    for (let tries = 0; (await direct.directConnections(plainAdmin)).length < 2; tries++) {
      assert.ok(tries < 100, 'the JS-thread connection never opened')
      await lock.isLocked('warm-up')
      await sleep(10)
    }
    for (let round = 0; round < 5; round++) {
      const key = `direct:in-flight-${round}`
      const holder = await lock.acquire(key, 10_000)
      const started = Date.now()
      const waiting = lock.waitForLock(key, 8000, 10_000)
      const released = holder.release()
      const handle = await waiting
      await released
      assert.equal(holder.isHeld, false)
      const took = Date.now() - started
      assert.ok(took < 1000, `round ${round}: waited ${took} ms, for its poll`)
      assert.equal(await plainAdmin.get(`lock:${key}`), handle.token)
      assert.ok(BigInt(handle.fence) > BigInt(holder.fence))
      await handle.release()
    }
  } finally {
    plainAdmin.disconnect()
    await plain.close()
  }
})

test("DistributedLockService's acquire and release go over the JS-thread connection too", async () => {
  const DistributedLockService = require('../maestro')
  const lock = new DistributedLock(server.url)
  await direct.withDirect(lock, admin)
  const [id] = await direct.directConnections(admin)
  const calls = (info, command) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
  const service = new DistributedLockService('direct:service', 5000, server.url)
  // The first acquire loads the refresh script through the runtime; the next ones go direct.
  assert.equal(await service.acquire(), true)
  assert.equal(await service.release(), true)
  const before = await admin.info('commandstats')
  assert.equal(await service.acquire(), true)
  assert.equal(await admin.get('direct:service'), service.lockValue)
  assert.equal(await service.release(), true)
  const after = await admin.info('commandstats')
  assert.equal(await admin.exists('direct:service'), 0)
  // One transaction to acquire, one script to release, and nothing else.
  assert.equal(calls(after, 'exec') - calls(before, 'exec'), 1)
  assert.equal(calls(after, 'evalsha') - calls(before, 'evalsha'), 1)
  assert.equal(calls(after, 'subscribe') - calls(before, 'subscribe'), 0)
  const line = (await admin.client('LIST')).split('\n').find((l) => l.includes(`id=${id} `))
  assert.match(line, /cmd=evalsha/)
  // Held by someone else: the wait goes on, and ends when they release.
  const holder = await lock.acquire('service:held', 5000)
  const other = new DistributedLockService('lock:service:held', 5000, server.url)
  const waiting = other.acquire(5000, 3000)
  await sleep(100)
  await holder.release()
  assert.equal(await waiting, true)
  assert.equal(await admin.get('lock:service:held'), other.lockValue)
  assert.equal(await other.release(), true)
  await service.disconnect()
  await other.disconnect()
})

test("maestro's acquire(ttl, 0) makes its one attempt in full, however slow the server", async () => {
  const { startProxy } = require('./helpers/tcp-proxy')
  const DistributedLockService = require('../maestro')
  const proxy = await startProxy(server.port)
  try {
    const lock = new DistributedLock(proxy.url)
    await direct.withDirect(lock, admin)
    const service = new DistributedLockService('direct:slow-service', 5000, proxy.url)
    // Loads the scripts, so the next acquire goes over the JS-thread connection.
    assert.equal(await service.acquire(5000, 0), true)
    assert.equal(await service.release(), true)
    proxy.setDelay(40) // 80 ms a round trip: past the grace a waiter's attempt gets
    assert.equal(await service.acquire(5000, 0), true)
    assert.equal(await admin.get('direct:slow-service'), service.lockValue)
    assert.equal(await service.release(), true)
    await service.disconnect()
  } finally {
    await proxy.close()
  }
})

test('a process that handed locks over exits on its own', async () => {
  const script = `
    const { DistributedLock } = require(${JSON.stringify(require.resolve('..'))})
    ;(async () => {
      const lock = new DistributedLock(${JSON.stringify(server.url)})
      for (let round = 0; round < 20; round++) {
        const held = await lock.acquire('direct:exits', 10000)
        const waiters = [1, 2, 3].map(() => lock.waitForLock('direct:exits', 5000, 10000))
        await new Promise((r) => setTimeout(r, 5))
        await held.release()
        for (const waiting of waiters) await (await waiting).release()
      }
      process.stdout.write('done')
    })()
  `
  const { spawn } = require('node:child_process')
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  let doneAt
  child.stdout.on('data', (d) => {
    out += d
    doneAt = performance.now()
  })
  const code = await new Promise((resolve) => child.on('exit', resolve))
  assert.equal(code, 0)
  assert.equal(out, 'done')
  assert.ok(performance.now() - doneAt < 1000, 'the process lingered after its last release')
})

test('a connection killed under 400 calls in flight loses none of them', async () => {
  const lock = new DistributedLock(server.url)
  await direct.withDirect(lock, admin)
  const [id] = await direct.directConnections(admin)
  const acquiring = Array.from({ length: 400 }, (_, i) => lock.acquire(`direct:killed:${i}`, 10_000))
  await admin.client('KILL', 'ID', id)
  const handles = await Promise.all(acquiring)
  assert.equal(handles.length, 400)
  const fences = new Set(handles.map((h) => h.key))
  assert.equal(fences.size, 400)
  for (let i = 0; i < 400; i += 37) {
    assert.equal(await admin.get(`lock:direct:killed:${i}`), handles[i].token)
  }
  await Promise.all(handles.map((h) => h.release()))
  assert.equal((await admin.keys('lock:direct:killed:*')).filter((k) => !k.endsWith('\ufffdfence')).length, 0)
})

test('a silent server: the call ends at its bound, and a lock won meanwhile is freed', async () => {
  // A bound long enough that a loaded machine's stalls fit in what the check leaves above
  // it, while twice it (a call sent again, or waited for twice) does not.
  const lock = new DistributedLock(server.url, { commandTimeoutMs: 1000 })
  await direct.withDirect(lock, admin)
  server.pause()
  let failure
  const started = performance.now()
  try {
    await lock.acquire('direct:silent', 30_000)
  } catch (err) {
    failure = err
  } finally {
    setTimeout(() => server.resume(), 300)
  }
  const elapsed = performance.now() - started
  assert.equal(failure?.code, 'ETIMEDOUT', String(failure))
  assert.ok(elapsed >= 980 && elapsed < 1950, `told after ${elapsed.toFixed(0)} ms`)
  // The attempt ran once Redis resumed; nobody holds it, so it must not stay locked.
  let exists = 1
  for (let tries = 0; tries < 100 && exists; tries++) {
    await sleep(20)
    exists = await admin.exists('lock:direct:silent')
  }
  assert.equal(exists, 0, 'the late grant was not freed')
  const handle = await lock.acquire('direct:silent', 1000)
  await handle.release()
})

test('Redis errors read as on the tokio connection; NOSCRIPT is handled', async () => {
  const lock = new DistributedLock(server.url)
  await direct.withDirect(lock, admin)
  await admin.config('SET', 'maxmemory', '1')
  try {
    await assert.rejects(lock.acquire('direct:oom', 1000), (err) => err.code === 'EREDIS' && /OOM/.test(err.message))
  } finally {
    await admin.config('SET', 'maxmemory', '0')
  }
  await admin.script('FLUSH')
  const handle = await lock.acquire('direct:flushed', 1000)
  await admin.script('FLUSH')
  await handle.release()
  assert.equal(await admin.exists('lock:direct:flushed'), 0)
})

test('a worker thread that locks and ends (or is terminated mid-call) leaves the process well', async () => {
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { DistributedLock } = require(${JSON.stringify(require.resolve('..'))})
    const lock = new DistributedLock(workerData.url)
    ;(async () => {
      for (let i = 0; i < 200; i++) {
        const handle = await lock.acquire('direct:worker:' + workerData.n, 5000)
        await handle.release()
      }
      parentPort.postMessage('done')
      if (workerData.hang) for (;;) await lock.isLocked('direct:worker:busy')
    })()
  `
  const run = (n, hang) =>
    new Promise((resolve, reject) => {
      const worker = new Worker(source, { eval: true, workerData: { url: server.url, n, hang } })
      worker.once('error', reject)
      worker.once('message', () => {
        if (hang) setTimeout(() => worker.terminate(), 50)
      })
      worker.once('exit', resolve)
    })
  assert.equal(await run(1, false), 0)
  assert.equal(await run(2, true), 1)
  const lock = new DistributedLock(server.url)
  assert.equal(await lock.isLocked('direct:worker:1'), false)
})
