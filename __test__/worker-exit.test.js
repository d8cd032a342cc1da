'use strict'

// A JS environment that goes away (a worker thread terminated, the main thread at its end or
// at process.exit()) takes its waits and its kept-alive locks with it: a terminated waiter
// never wins the lock (by poll or by a handover from a release of this process) for a thread
// that no longer exists, and a lock it held with auto-refresh is released at once and never
// refreshed again. The waiters queued behind it get the lock as soon as its holder releases it.
// Runs on a private redis-server, or on the embedded memory:// backend with NRL_BACKEND=memory
// (`npm test` runs both; see helpers/backend.js).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { once } = require('node:events')
const { spawn } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const { startBackend, redisOnly } = require('./helpers/backend')
const { ownerKey } = require('./helpers/keys')

// maestro's configuration is read once, at load (in this thread and in each worker).
for (const name of Object.keys(process.env)) if (name.startsWith('MO_')) delete process.env[name]
const { DistributedLock, ExclusiveLock } = require('..')
const DistributedLockService = require('../maestro')

const ROOT = JSON.stringify(require.resolve('..'))
const MAESTRO = JSON.stringify(require.resolve('../maestro'))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// How long a queued waiter may take to get a released lock; far below every TTL and stall
// budget here (10 s and more), so only a handover or wake-up can meet it.
const PROMPT_MS = 1000

const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

let backend
let probe
const services = new Set() // held DistributedLockServices keep the process alive
const workers = new Set()

before(async () => {
  backend = await startBackend()
  probe = backend.client()
  await probe.connect()
})

after(async () => {
  for (const worker of workers) await worker.terminate()
  for (const service of services) await service.release().catch(() => {})
  probe?.disconnect()
  await backend?.close()
  assert.deepEqual(unhandled, [])
})

/** A worker running `body` (an async function's body, with `url`, `key`, `post` and the package). */
function startWorker(body, data) {
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { DistributedLock, ExclusiveLock } = require(${ROOT})
    const DistributedLockService = require(${MAESTRO})
    const { url, key } = workerData
    const post = (message) => parentPort.postMessage(message)
    ;(async () => { ${body} })().catch((err) => post({ error: String(err?.stack ?? err) }))
  `
  const worker = new Worker(source, { eval: true, workerData: { url: backend.url, ...data } })
  workers.add(worker)
  const messages = []
  worker.on('message', (message) => messages.push(message))
  worker.once('exit', () => workers.delete(worker))
  return { worker, messages }
}

/** The worker's next message. */
async function message(worker) {
  const [received] = await once(worker, 'message')
  if (received?.error) throw new Error(`worker failed: ${received.error}`)
  return received
}

async function terminate(worker) {
  await worker.terminate()
  workers.delete(worker)
}

/** Resolves with how long `promise` took, with its value. */
async function timed(promise) {
  const start = performance.now()
  const value = await promise
  return { value, ms: performance.now() - start }
}

/** Resolves once `check()` is true, or after `ms` with its last answer. */
/**
 * With `worker` waiting for `key` (held by `holder`), a waiter of this thread queues behind it;
 * the worker is terminated and the holder releases: the waiter behind gets the lock promptly,
 * and Redis holds its token. Resolves with its handle.
 */
async function behindTerminated(worker, lock, holder, key) {
  assert.equal(await message(worker), 'waiting')
  await sleep(200)
  const behind = lock.waitForLock(key, 8000, 10_000)
  await terminate(worker)
  await holder.release()
  const { value: handle, ms } = await timed(behind)
  assert.ok(ms < PROMPT_MS, `the waiter behind got the lock after ${Math.round(ms)} ms`)
  assert.equal(await probe.get(`lock:${key}`), handle.token)
  return handle
}

async function eventually(check, ms) {
  const deadline = performance.now() + ms
  for (;;) {
    if (await check()) return true
    if (performance.now() >= deadline) return false
    await sleep(20)
  }
}

test('a terminated worker waiting with autoRefresh never gets the lock: the waiter behind it does, promptly', async () => {
  const key = 'exit:wait:auto'
  const lock = new DistributedLock(backend.url)
  const holder = await lock.acquire(key, 20_000)
  const { worker, messages } = startWorker(
    `
      const lock = new DistributedLock(url)
      const waiting = lock.waitForLock(key, 60_000, 10_000, { autoRefresh: true })
      post('waiting')
      const handle = await waiting
      post({ won: handle.token ?? 'a watched handle' })
    `,
    { key },
  )
  const handle = await behindTerminated(worker, lock, holder, key)
  // Nothing took it from the waiter since, and the worker never heard of a win.
  await sleep(300)
  assert.equal(await probe.get(`lock:${key}`), handle.token)
  assert.deepEqual(messages, ['waiting'])
  await handle.release()
})

test('a terminated worker waiting without autoRefresh leaves the lock to the waiter behind it', async () => {
  const key = 'exit:wait:plain'
  const lock = new DistributedLock(backend.url)
  const holder = await lock.acquire(key, 20_000)
  const { worker } = startWorker(
    `
      const lock = new DistributedLock(url)
      const waiting = lock.waitForLock(key, 60_000, 10_000)
      post('waiting')
      await waiting
      post('won')
    `,
    { key },
  )
  const handle = await behindTerminated(worker, lock, holder, key)
  await handle.release()
})

test("a terminated worker's DistributedLockService wait ends: the service waiting behind it gets the lock", async () => {
  const key = 'exit:service'
  const holder = new DistributedLockService(key, 10_000, backend.url)
  services.add(holder)
  assert.equal(await holder.acquire(), true)
  const { worker, messages } = startWorker(
    `
      const service = new DistributedLockService(key, 10_000, url)
      const won = service.acquire(undefined, 60_000)
      post('waiting')
      post({ won: await won })
    `,
    { key },
  )
  assert.equal(await message(worker), 'waiting')
  // Its first attempt failed and it waits in the native queue.
  await sleep(300)
  const behind = new DistributedLockService(key, 10_000, backend.url)
  services.add(behind)
  const waiting = behind.acquire(undefined, 8000)
  await sleep(100)
  await terminate(worker)
  assert.equal(await holder.release(), true)
  const { value: won, ms } = await timed(waiting)
  assert.equal(won, true)
  assert.ok(ms < PROMPT_MS, `the service behind got the lock after ${Math.round(ms)} ms`)
  assert.equal(await probe.get(key), behind.lockValue)
  assert.deepEqual(messages, ['waiting'])
  assert.equal(await behind.release(), true)
})

test('a worker terminated while it holds an autoRefresh lock releases it, and nothing refreshes it again', async () => {
  const key = 'exit:held:auto'
  const { worker } = startWorker(
    `
      const lock = new DistributedLock(url)
      const handle = await lock.acquire(key, 3000, { autoRefresh: true })
      // A DistributedLock handle does not keep a thread alive: this does, until terminated.
      setInterval(() => {}, 1000)
      post({ token: handle.token })
    `,
    { key },
  )
  const { token } = await message(worker)
  assert.equal(await probe.get(`lock:${key}`), token)
  // Past a refresh or two: the hold is live.
  await sleep(1200)
  assert.equal(await probe.get(`lock:${key}`), token)
  await terminate(worker)
  assert.ok(
    await eventually(async () => (await probe.exists(`lock:${key}`)) === 0, 500),
    'the lock outlived its terminated holder',
  )
  // Put the token back with a long TTL: a refresh of it would set its TTL back to 3 s.
  await probe.set(`lock:${key}`, token, 'PX', 60_000)
  await sleep(2500)
  const ttl = await probe.pttl(`lock:${key}`)
  assert.ok(ttl > 50_000, `the lock was refreshed after its holder was gone (PTTL ${ttl})`)
  await probe.del(`lock:${key}`)
})

test('a worker terminated while it holds an ExclusiveLock releases it', async () => {
  const { worker } = startWorker(
    `
      const lock = new ExclusiveLock({ cache_connection: url, name: 'exit-exclusive', lock_ttl_ms: 3000, lock_refresh_ms: 1000 })
      if (!(await lock.acquire())) throw new Error('not acquired')
      post({ key: lock.key })
    `,
    {},
  )
  const { key } = await message(worker)
  assert.equal(await probe.exists(key), 1)
  // Written by the acquire when it went as the script (a fresh socket's first attempt), else
  // by the first refresh, 1 s on (ops/exclusive.rs): then the release must delete both.
  assert.ok(await eventually(async () => (await probe.exists(ownerKey(key))) === 1, 2500), 'no owner key beside the lock key')
  await terminate(worker)
  assert.ok(
    await eventually(async () => (await probe.exists(key, ownerKey(key))) === 0, 500),
    'the ExclusiveLock outlived its terminated holder',
  )
})

test("a terminated worker's unref()ed ExclusiveLock is left to its TTL, as the original's, and not refreshed", async () => {
  const { worker } = startWorker(
    `
      const lock = new ExclusiveLock({ cache_connection: url, name: 'exit-unref', lock_ttl_ms: 3000, lock_refresh_ms: 500 })
      if (!(await lock.acquire())) throw new Error('not acquired')
      lock.unref()
      setInterval(() => {}, 1000)
      post({ key: lock.key })
    `,
    {},
  )
  const { key } = await message(worker)
  await terminate(worker)
  const left = await probe.pttl(key)
  assert.ok(left > 0, 'the unref()ed lock was deleted with its thread')
  // Past two refresh periods: a refresh would have set its TTL back to 3 s.
  await sleep(1200)
  const later = await probe.pttl(key)
  assert.ok(later > 0 && later <= left - 1000, `refreshed after its thread was gone (PTTL ${left} then ${later})`)
  await probe.del(key, ownerKey(key))
})

/**
 * Starts a worker that calls `call` (an expression on `lock`, `key` and the package) and
 * terminates it 0 to `maxDelayMs` ms after the call, `rounds` times, a few at a time, each
 * on its own key. The worker sets its flag (a shared Int32Array, seen here even once it is
 * gone) as its code receives what was won. Resolves with the keys and the flags.
 */
async function terminatedMidCall({ name, make, call, keyOf, rounds, maxDelayMs }) {
  const flags = new Int32Array(new SharedArrayBuffer(4 * rounds))
  const keys = []
  const one = async (index) => {
    const key = `exit:mid:${name}:${maxDelayMs}:${index}`
    keys.push(keyOf(key))
    const source = `
      const { parentPort, workerData } = require('node:worker_threads')
      const { DistributedLock, ExclusiveLock } = require(${ROOT})
      const DistributedLockService = require(${MAESTRO})
      const { url, key, flags, index } = workerData
      const lock = ${make}
      const pending = ${call}
      parentPort.postMessage('called')
      pending.then((won) => { if (won) Atomics.store(flags, index, 1) }, () => {})
    `
    const worker = new Worker(source, { eval: true, workerData: { url: backend.url, key, flags, index } })
    workers.add(worker)
    await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    const delay = Math.random() * maxDelayMs
    if (delay >= 0.5) await sleep(delay)
    await terminate(worker)
  }
  for (let start = 0; start < rounds; start += 5) {
    const batch = []
    for (let index = start; index < Math.min(rounds, start + 5); index++) batch.push(one(index))
    await Promise.all(batch)
  }
  // What a terminated thread's end frees is sent as it goes; a lock left now is left to its TTL.
  await sleep(300)
  return { keys, flags }
}

/** The keys of `run` still locked although their worker's code never received the lock. */
async function lockedUnreceived({ keys, flags }) {
  const left = []
  for (const [index, key] of keys.entries()) {
    if (!Atomics.load(flags, index) && (await probe.exists(key)) === 1) left.push(key)
  }
  return left
}

/** The keys of `run` still locked at all. */
async function lockedAny({ keys }) {
  const left = []
  for (const key of keys) if ((await probe.exists(key)) === 1) left.push(key)
  return left
}

const plain = { make: 'new DistributedLock(url)', keyOf: (key) => `lock:${key}` }
for (const [name, call, rounds, maxDelayMs] of [
  ['acquire', 'lock.acquire(key, 30000)', 80, 1],
  ['acquire', 'lock.acquire(key, 30000)', 30, 40],
  ['tryAcquire', 'lock.tryAcquire(key, 30000)', 30, 1],
  ['waitForLock', 'lock.waitForLock(key, 30000, 5000)', 30, 1],
]) {
  test(`a worker terminated 0-${maxDelayMs} ms after ${name}() leaves no lock its code never received`, async () => {
    const left = await lockedUnreceived(await terminatedMidCall({ name, call, rounds, maxDelayMs, ...plain }))
    assert.deepEqual(left, [], `${left.length} of ${rounds} locks outlived their terminated callers`)
  })
}

test('a worker terminated 0-1 ms after ExclusiveLock.acquire() or the service\'s acquire() leaves no lock', async () => {
  const exclusive = await terminatedMidCall({
    name: 'exclusive',
    make: 'new ExclusiveLock({ cache_connection: url, name: key, lock_ttl_ms: 30000, lock_refresh_ms: 10000 })',
    call: 'lock.acquire()',
    keyOf: (key) => new ExclusiveLock({ cache_connection: backend.url, name: key }).key,
    rounds: 25,
    maxDelayMs: 1,
  })
  const service = await terminatedMidCall({
    name: 'service',
    make: 'new DistributedLockService(key, 30000, url)',
    call: 'lock.acquire(undefined, 5000)',
    keyOf: (key) => key,
    rounds: 25,
    maxDelayMs: 1,
  })
  // Both keep what they hold alive, so the thread's end releases it, received or not.
  const left = [...(await lockedAny(exclusive)), ...(await lockedAny(service))]
  assert.deepEqual(left, [], `${left.length} of 50 locks outlived their terminated callers`)
})

test('a worker terminated while the reactions to its settled handles run leaves none of those locks', async () => {
  // Two acquisitions settle in one batch (the thread is blocked until both are won); the first
  // reaction never returns, so the second never runs, and the worker is terminated in it.
  const key = 'exit:reactions'
  const { worker, messages } = startWorker(
    `
      const lock = new DistributedLock(url)
      const spin = () => { for (;;) {} }
      lock.acquire(key + ':a', 30000).then(spin)
      lock.acquire(key + ':b', 30000).then(spin)
      post('calling')
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500)
    `,
    { key },
  )
  assert.equal(await message(worker), 'calling')
  // Both won (a lock left free would prove nothing), then the thread spins.
  assert.ok(
    await eventually(async () => (await probe.exists(`lock:${key}:a`, `lock:${key}:b`)) === 2, 2000),
    'the worker did not win both locks',
  )
  await sleep(600)
  await terminate(worker)
  assert.ok(
    await eventually(async () => (await probe.exists(`lock:${key}:a`, `lock:${key}:b`)) === 0, 500),
    'a lock handed to a thread terminated before its code could release it outlived it',
  )
  assert.deepEqual(messages, ['calling'])
})

redisOnly('a worker terminated while the reactions to handles its own releases handed over run leaves none of those locks', async () => {
  // As above, with the locks handed by releases on the worker's own connection to waiters of
  // the same thread: both handovers are answered in one batch, whose first reaction spins.
  const key = 'exit:handed'
  const { worker, messages } = startWorker(
    `
      const lock = new DistributedLock(url)
      const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
      // The JS-thread connection opens after the first call.
      for (let i = 0; i < 20; i++) { await lock.isLocked('warm-up'); await sleep(10) }
      const a = await lock.acquire(key + ':a', 30000)
      const b = await lock.acquire(key + ':b', 30000)
      const spin = () => { for (;;) {} }
      lock.waitForLock(key + ':a', 30000, 10000).then(spin)
      lock.waitForLock(key + ':b', 30000, 10000).then(spin)
      await sleep(100)
      post({ a: a.token, b: b.token })
      a.release()
      b.release()
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500)
    `,
    { key },
  )
  const first = await message(worker)
  const tokens = async () => [await probe.get(`lock:${key}:a`), await probe.get(`lock:${key}:b`)]
  // Both handed over (to tokens other than the holders'), then the thread spins.
  assert.ok(
    await eventually(async () => {
      const [a, b] = await tokens()
      return a !== null && b !== null && a !== first.a && b !== first.b
    }, 2000),
    `the waiters were not handed both locks: ${JSON.stringify(await tokens())}`,
  )
  await sleep(300)
  await terminate(worker)
  assert.ok(
    await eventually(async () => (await probe.exists(`lock:${key}:a`, `lock:${key}:b`)) === 0, 500),
    'a lock handed over to a thread terminated before its code could release it outlived it',
  )
  assert.equal(messages.length, 1)
})

redisOnly('a worker terminated while the reactions to handles its own releases lent on handover run leaves none of those locks', async () => {
  // As above with lendOnHandover: each waiter is answered as its handover is queued, before
  // Redis runs it, and the first reaction spins, so the JS thread never again writes or reads
  // on its connection. The teardown sends the handovers through the runtime; what frees the
  // waiters' locks must reach Redis after them, or it finds the releasers' tokens, frees
  // nothing, and the handovers then give the dead waiters the locks for their whole TTL.
  const key = 'exit:lent'
  const { worker, messages } = startWorker(
    `
      const lock = new DistributedLock(url, { lendOnHandover: true })
      const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
      for (let i = 0; i < 20; i++) { await lock.isLocked('warm-up'); await sleep(10) }
      const a = await lock.acquire(key + ':a', 30000)
      const b = await lock.acquire(key + ':b', 30000)
      const spin = (handle) => { post({ lent: handle.token }); for (;;) {} }
      lock.waitForLock(key + ':a', 30000, 10000).then(spin)
      lock.waitForLock(key + ':b', 30000, 10000).then(spin)
      await sleep(100)
      post({ a: a.token, b: b.token })
      a.release()
      b.release()
    `,
    { key },
  )
  const first = await message(worker)
  // Answered without a turn of the event loop: lent, with its handover still to be sent.
  const { lent } = await message(worker)
  assert.ok(typeof lent === 'string' && lent !== first.a, `the first waiter got ${lent}`)
  assert.equal(await probe.exists(`lock:${key}:a`, `lock:${key}:b`), 2)
  await terminate(worker)
  assert.ok(
    await eventually(async () => (await probe.exists(`lock:${key}:a`, `lock:${key}:b`)) === 0, 1000),
    `a lock lent to a thread terminated before its code could release it outlived it: ${JSON.stringify([
      await probe.get(`lock:${key}:a`),
      await probe.get(`lock:${key}:b`),
    ])} (lent ${lent})`,
  )
  assert.equal(messages.length, 2)
})

/** Runs `source` in a child node process (argv[1] is the server's URL); resolves with its exit. */
async function runChild(source) {
  const child = spawn(process.execPath, ['-e', source, backend.url], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  let ending = null
  child.stdout.on('data', (chunk) => {
    stdout += chunk
    if (ending === null && stdout.startsWith('ending')) ending = performance.now()
  })
  child.stderr.on('data', (chunk) => (stderr += chunk))
  const exited = once(child, 'exit')
  // Well below the TTLs (10 s and more) and stall budgets (30 s) here, which are how long a
  // lock won for a dead waiter, or kept alive for it, would hold the process's locks up.
  const timer = setTimeout(() => child.kill('SIGKILL'), 8000)
  const [code, signal] = await exited
  clearTimeout(timer)
  assert.equal(signal, null, `the child did not exit on its own; stdout ${stdout}; stderr ${stderr}`)
  assert.equal(code, 0, `stderr: ${stderr}`)
  assert.ok(ending !== null, `stdout: ${stdout}`)
  const lingered = performance.now() - ending
  assert.ok(lingered < 3000, `the child exited ${Math.round(lingered)} ms after its main thread ended`)
}

// These two run a child process, which shares a Redis server but not a memory:// keyspace.
redisOnly('the process exits promptly after such a worker, and a lock its main thread kept alive is released at exit', async () => {
  await runChild(`
    const { Worker } = require('node:worker_threads')
    const { once } = require('node:events')
    const { DistributedLock } = require(${ROOT})
    const url = process.argv[1]
    ;(async () => {
      const lock = new DistributedLock(url)
      const holder = await lock.acquire('exit:process:held', 20_000)
      const worker = new Worker(\`
        const { parentPort, workerData } = require('node:worker_threads')
        const { DistributedLock } = require(${ROOT})
        const lock = new DistributedLock(workerData)
        lock.waitForLock('exit:process:held', 60_000, 10_000, { autoRefresh: true }).then(() => parentPort.postMessage('won'))
        lock.acquire('exit:process:worker', 10_000, { autoRefresh: true }).then(() => parentPort.postMessage('holding'))
      \`, { eval: true, workerData: url })
      const [first] = await once(worker, 'message')
      if (first !== 'holding') throw new Error('worker said ' + first)
      await new Promise((resolve) => setTimeout(resolve, 200))
      await worker.terminate()
      await holder.release()
      await lock.acquire('exit:process:main', 20_000, { autoRefresh: true })
      console.log('ending')
    })().catch((err) => { console.error(err); process.exitCode = 2 })
  `)
  // Every lock is gone, none by its TTL (10 s and more): the worker's held one (released as it
  // was terminated), the one it waited for (released by the main thread, never won by the dead
  // waiter), and the main thread's own kept-alive one (released at exit).
  const keys = ['exit:process:worker', 'exit:process:held', 'exit:process:main'].map((k) => `lock:${k}`)
  assert.equal(await probe.exists(...keys), 0)
})

redisOnly('process.exit() releases the kept-alive locks of the main thread and of its running workers', async () => {
  await runChild(`
    const { Worker } = require('node:worker_threads')
    const { once } = require('node:events')
    const { DistributedLock } = require(${ROOT})
    const url = process.argv[1]
    ;(async () => {
      const lock = new DistributedLock(url)
      const worker = new Worker(\`
        const { parentPort, workerData } = require('node:worker_threads')
        const { DistributedLock } = require(${ROOT})
        const lock = new DistributedLock(workerData)
        setInterval(() => {}, 1000)
        lock.acquire('exit:call:worker', 10_000, { autoRefresh: true }).then(() => parentPort.postMessage('holding'))
      \`, { eval: true, workerData: url })
      await once(worker, 'message')
      await lock.acquire('exit:call:main', 20_000, { autoRefresh: true })
      console.log('ending')
      process.exit(0)
    })().catch((err) => { console.error(err); process.exitCode = 2 })
  `)
  assert.equal(await probe.exists('lock:exit:call:main', 'lock:exit:call:worker'), 0)
})
