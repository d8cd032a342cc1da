'use strict'

// The logger option and onEvent hook of every API object, on a test redis-server and
// memory://; a throwing hook or logger never breaks a lock; DEBUG=native-redis-lock traces
// each Redis call to stderr (a child process with the variable set).
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFile, spawn } = require('node:child_process')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('..')
const syncguard = require('../syncguard')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits until `done()` holds, up to `ms` (a refresh due in 300 ms may come late on a loaded machine). */
async function until(done, ms = 3_000) {
  const end = Date.now() + ms
  while (!done() && Date.now() < end) await sleep(10)
}
let server
// A Redlock's three nodes.
let nodes = []
let seq = 0
const unique = (what) => `tracing-${what}-${process.pid}-${++seq}`

before(async () => {
  ;[server, ...nodes] = await Promise.all([startRedis(), startRedis(), startRedis(), startRedis()])
})

after(async () => {
  await Promise.all([server, ...nodes].map((s) => s?.close()))
})

const backends = {
  redis: () => server.url,
  'memory://': () => `memory://${unique('mem')}`,
  redlock: () => nodes.map((node) => node.url),
}

/** A hook that keeps what it hears. */
function recorder() {
  const events = []
  const onEvent = (event) => events.push(event)
  const of = (type) => events.filter((event) => event.type === type)
  return { events, onEvent, of }
}

/** Loggers of the three shapes, each keeping `[level, message, fields]`. */
function loggers() {
  const lines = []
  const level = (name, fieldsFirst) =>
    fieldsFirst ? (fields, message) => lines.push([name, message, fields]) : (message, fields) => lines.push([name, message, fields])
  const make = (fieldsFirst) => ({
    debug: level('debug', fieldsFirst),
    info: level('info', fieldsFirst),
    warn: level('warn', fieldsFirst),
    error: level('error', fieldsFirst),
  })
  // pino tells itself apart by `bindings()`: it takes `(fields, message)`.
  const pino = { ...make(true), bindings: () => ({}) }
  const winston = make(false)
  return { lines, pino, winston }
}

for (const [name, target] of Object.entries(backends)) {
  describe(`onEvent on ${name}`, () => {
    test('DistributedLock: every event of a scripted sequence, with key, fence and timings', async () => {
      const hook = recorder()
      const lock = new DistributedLock(target(), { keyPrefix: `${unique('dl')}:`, onEvent: hook.onEvent })
      const first = await lock.acquire('k', 10_000)
      assert.equal(await lock.tryAcquire('k', 10_000), null)
      await assert.rejects(lock.acquire('k', 10_000), { code: 'ELOCKED' })
      await first.extend(1_000)
      const waiter = lock.waitForLock('k', 5_000, 10_000)
      await sleep(50)
      await first.release()
      const second = await waiter
      await second.release()
      await until(() => hook.of('contended').length >= 3 && hook.of('woken').length + hook.of('handed-over').length >= 1)
      const acquired = hook.of('acquired')
      assert.equal(acquired.length, 2)
      assert.deepEqual(acquired.map((e) => [e.api, e.key, e.fence]), [
        ['DistributedLock', 'k', first.fence],
        ['DistributedLock', 'k', second.fence],
      ])
      assert.ok(acquired[1].waitedMs >= 45, `waited ${acquired[1].waitedMs}`)
      assert.ok(hook.of('contended').length >= 3, JSON.stringify(hook.events.map((e) => e.type)))
      assert.ok(hook.of('contended').every((e) => e.key === 'k'))
      // The release reached the waiter: woken (it tried again) or handed the lock.
      assert.ok(hook.of('woken').length + hook.of('handed-over').length >= 1)
      assert.equal(hook.of('refreshed').length, 1)
      assert.deepEqual(hook.of('released').map((e) => e.fence), [first.fence, second.fence])
      assert.ok(hook.of('released').every((e) => typeof e.heldMs === 'number' && e.heldMs >= 0))
      const errors = hook.of('error')
      assert.deepEqual(errors.map((e) => [e.code, e.call, e.key]), [['ELOCKED', 'acquire', 'k']])
      assert.ok(hook.events.every((e) => typeof e.at === 'number'))
    })

    test('ExclusiveLock: acquired, contended, refreshed, released', async () => {
      const hook = recorder()
      const settings = { name: unique('ex'), cache_connection: target(), lock_ttl_ms: 1000, lock_refresh_ms: 300 }
      const a = new ExclusiveLock({ ...settings, onEvent: hook.onEvent })
      const b = new ExclusiveLock({ ...settings, onEvent: hook.onEvent })
      assert.equal(await a.acquire(), true)
      assert.equal(await b.acquire(), false)
      await until(() => hook.of('refreshed').length >= 1)
      await a.release()
      await until(() => hook.of('contended').length >= 1)
      assert.equal(hook.of('acquired').length, 1)
      assert.equal(hook.of('acquired')[0].api, 'ExclusiveLock')
      assert.equal(hook.of('contended').length, 1)
      assert.ok(hook.of('refreshed').length >= 1)
      assert.equal(hook.of('released').length, 1)
    })

    test('DistributedLockService: acquired, released', async () => {
      const hook = recorder()
      const service = new DistributedLockService(unique('svc'), 5_000, target(), { onEvent: hook.onEvent })
      assert.equal(await service.acquire(), true)
      assert.equal(await service.release(), true)
      assert.deepEqual(hook.events.map((e) => e.type), ['acquired', 'released'])
      assert.equal(hook.events[0].api, 'DistributedLockService')
    })

    test('syncguard backend: acquired, contended, refreshed, released', async () => {
      const hook = recorder()
      const backend = syncguard.createRedisBackend(target(), { keyPrefix: unique('sg'), onEvent: hook.onEvent })
      const won = await backend.acquire({ key: 'k', ttlMs: 5_000 })
      assert.equal((await backend.acquire({ key: 'k', ttlMs: 5_000 })).ok, false)
      await backend.extend({ lockId: won.lockId, ttlMs: 5_000 })
      await backend.release({ lockId: won.lockId })
      await until(() => hook.of('contended').length >= 1)
      assert.deepEqual(hook.of('acquired').map((e) => [e.api, e.key, e.fence]), [['syncguard', 'k', won.fence]])
      assert.equal(hook.of('contended').length, 1)
      assert.equal(hook.of('refreshed').length, 1)
      assert.equal(hook.of('released').length, 1)
    })

    test('a throwing hook breaks no lock, and is logged', async () => {
      const { lines, winston } = loggers()
      const lock = new DistributedLock(target(), {
        keyPrefix: `${unique('throw')}:`,
        logger: winston,
        onEvent: () => {
          throw new Error('hook failed')
        },
      })
      const handle = await lock.acquire('k', 5_000)
      assert.equal(await lock.tryAcquire('k', 5_000), null)
      await handle.release()
      await until(() => lines.filter(([, message]) => message.includes('onEvent hook threw')).length >= 3)
      const threw = lines.filter(([, message]) => message.includes('onEvent hook threw'))
      assert.ok(threw.length >= 3, JSON.stringify(lines.map(([l, m]) => [l, m])))
      assert.ok(threw.every(([level, , fields]) => level === 'error' && fields.error.message === 'hook failed'))
    })
  })
}

describe('onEvent: a lost lock', () => {
  test('DistributedLock autoRefresh: lost, with the key, the fence and ELOST, once; logged at warn', async (t) => {
    const hook = recorder()
    const { lines, winston: logger } = loggers()
    const prefix = `${unique('lost')}:`
    const lock = new DistributedLock(server.url, { keyPrefix: prefix, onEvent: hook.onEvent, logger })
    const handle = await lock.acquire('k', 600, { autoRefresh: true })
    const client = new Redis(server.url)
    t.after(() => client.disconnect())
    // Taken from under the holder: its next refresh finds the lock gone.
    await client.del(`${prefix}k`)
    const error = await handle.lost
    assert.equal(error.code, 'ELOST')
    await until(() => hook.of('lost').length >= 1)
    const lost = hook.of('lost')
    assert.equal(lost.length, 1, JSON.stringify(hook.events.map((e) => e.type)))
    assert.equal(lost[0].api, 'DistributedLock')
    assert.equal(lost[0].key, 'k')
    assert.equal(lost[0].fence, handle.fence)
    assert.equal(lost[0].code, 'ELOST')
    assert.equal(lost[0].error.code, 'ELOST')
    assert.equal(typeof lost[0].at, 'number')
    await until(() => lines.some(([, , fields]) => fields.type === 'lost'))
    const logged = lines.filter(([, , fields]) => fields.type === 'lost').map(([level, message, fields]) => [level, message, fields.key, fields.code])
    assert.deepEqual(logged, [['warn', 'native-redis-lock: lock lost', 'k', 'ELOST']])
  })
})

describe('logger', () => {
  test('pino-, winston- and console-shaped loggers get each event at its level', async () => {
    const { lines, pino, winston } = loggers()
    for (const logger of [pino, winston]) {
      const lock = new DistributedLock(`memory://${unique('log')}`, { logger })
      const handle = await lock.acquire('k', 5_000)
      await assert.rejects(lock.acquire('k', 5_000), { code: 'ELOCKED' })
      await handle.release()
    }
    await until(() => lines.length >= 8)
    const seen = lines.map(([level, message, fields]) => [level, message, fields.type])
    const once = [
      ['debug', 'native-redis-lock: lock acquired', 'acquired'],
      ['debug', 'native-redis-lock: lock held by another holder', 'contended'],
      ['error', 'native-redis-lock: lock call failed', 'error'],
      ['debug', 'native-redis-lock: lock released', 'released'],
    ]
    // The contention comes from the native side, through the thread's queue: in any order.
    const sorted = (rows) => rows.map((row) => JSON.stringify(row)).sort()
    assert.deepEqual(sorted(seen), sorted([...once, ...once]))
    // console itself: its methods take (message, fields).
    const original = console.debug
    const heard = []
    console.debug = (...args) => heard.push(args)
    try {
      const lock = new DistributedLock(`memory://${unique('console')}`, { logger: console })
      await (await lock.acquire('k', 5_000)).release()
    } finally {
      console.debug = original
    }
    assert.deepEqual(heard.map(([message, fields]) => [message, fields.type]), [
      ['native-redis-lock: lock acquired', 'acquired'],
      ['native-redis-lock: lock released', 'released'],
    ])
  })

  test("syncguard's lockId reaches onEvent but never the log; no API logs a token", async () => {
    const { lines, pino, winston } = loggers()
    for (const logger of [pino, winston]) {
      const hook = recorder()
      const backend = syncguard.createRedisBackend(server.url, { keyPrefix: unique('secret'), logger, onEvent: hook.onEvent })
      const won = await backend.acquire({ key: 'k', ttlMs: 5_000 })
      await backend.extend({ lockId: won.lockId, ttlMs: 5_000 })
      await backend.release({ lockId: won.lockId })
      assert.deepEqual(hook.of('refreshed').map((e) => e.lockId), [won.lockId])
      assert.deepEqual(hook.of('released').map((e) => e.lockId), [won.lockId])
      const logged = lines.filter(([, , fields]) => fields.type === 'refreshed' || fields.type === 'released')
      assert.equal(logged.length >= 2, true, JSON.stringify(lines))
      assert.ok(!JSON.stringify(lines).includes(won.lockId), 'a lockId in the log')
    }
    lines.length = 0
    const lock = new DistributedLock(server.url, { keyPrefix: `${unique('token')}:`, logger: winston })
    const handle = await lock.acquire('k', 5_000, { autoRefresh: true })
    const token = handle.token
    await handle.extend(5_000)
    await handle.release()
    assert.ok(lines.length >= 3, JSON.stringify(lines))
    assert.ok(!JSON.stringify(lines).includes(token), 'a token in the log')
  })

  test("DistributedLockService: its logger hears the events only with logEvents (maestro's messages either way)", async () => {
    const events = (lines) => lines.filter(([, message]) => String(message).startsWith('native-redis-lock:'))
    // The default, as maestro: its own messages, no event.
    const { lines: quiet, winston } = loggers()
    const plain = new DistributedLockService(unique('svc-quiet'), 5_000, server.url, { logger: winston })
    assert.equal(await plain.acquire(), true)
    assert.equal(await plain.release(), true)
    assert.ok(quiet.some(([, message]) => /^Lock acquired/.test(message)), JSON.stringify(quiet))
    assert.deepEqual(events(quiet), [])
    // Opted in: the events too, at their levels; pino with its fields first.
    const { lines, pino } = loggers()
    const service = new DistributedLockService(unique('svc-log'), 5_000, server.url, { logger: pino, logEvents: true })
    assert.equal(await service.acquire(), true)
    assert.equal(await service.release(), true)
    assert.deepEqual(events(lines).map(([level, message, fields]) => [level, message, fields.type, fields.api]), [
      ['debug', 'native-redis-lock: lock acquired', 'acquired', 'DistributedLockService'],
      ['debug', 'native-redis-lock: lock released', 'released', 'DistributedLockService'],
    ])
    // maestro's logger service (logDebug, ...) takes them the same way.
    const heard = []
    const maestroLogger = { logDebug: (...args) => heard.push(['debug', ...args]), logInfo() {}, logWarning() {}, logError() {} }
    const other = new DistributedLockService(unique('svc-maestro'), 5_000, server.url, { logger: maestroLogger, logEvents: true })
    assert.equal(await other.acquire(), true)
    assert.equal(await other.release(), true)
    assert.deepEqual(heard.filter(([, message]) => String(message).startsWith('native-redis-lock:')).map(([level, message, fields]) => [level, message, fields.type]), [
      ['debug', 'native-redis-lock: lock acquired', 'acquired'],
      ['debug', 'native-redis-lock: lock released', 'released'],
    ])
    assert.throws(() => new DistributedLockService('x', 1000, 'memory://', { logEvents: 'yes' }), { code: 'EINVAL', message: /options\.logEvents must be a boolean/ })
  })

  test('a throwing logger breaks no lock', async () => {
    const boom = () => {
      throw new Error('logger failed')
    }
    const logger = { debug: boom, info: boom, warn: boom, error: boom }
    const lock = new DistributedLock(`memory://${unique('boom')}`, { logger, onEvent: boom })
    const handle = await lock.acquire('k', 5_000)
    assert.equal(handle.isHeld, true)
    await handle.release()
  })

  test('no logger and no hook: silent, and a bad one is refused naming it', () => {
    assert.throws(() => new DistributedLock('memory://', { logger: { debug() {} } }), {
      code: 'EINVAL',
      message: /options\.logger must have debug, info, warn and error methods \(missing info\)/,
    })
    assert.throws(() => new DistributedLock('memory://', { onEvent: 'yes' }), { code: 'EINVAL', message: /options\.onEvent must be a function/ })
    assert.throws(() => new ExclusiveLock({ name: 'x', cache_connection: 'memory://', onEvent: 1 }), { message: /opts\.onEvent/ })
    assert.throws(() => new DistributedLockService('x', 1000, 'memory://', { onEvent: 1 }), { message: /options\.onEvent/ })
    assert.throws(() => syncguard.createRedisBackend('memory://', { logger: 1 }), { message: /options\.logger/ })
  })
})

describe('DEBUG=native-redis-lock', () => {
  const run = (env, fixture = 'debug-trace.js') =>
    new Promise((resolve, reject) => {
      const script = path.join(__dirname, 'fixtures', fixture)
      execFile(process.execPath, [script, server.url], { env: { ...process.env, ...env }, timeout: 20_000 }, (err, stdout, stderr) =>
        err ? reject(Object.assign(err, { stderr })) : resolve({ stdout, stderr }),
      )
    })
  const lines = (stderr) => stderr.split('\n').filter((line) => line.includes('native-redis-lock '))

  test('each Redis call to stderr, with its duration, key names and no token', async () => {
    for (const spec of ['native-redis-lock', '*', 'express,native-*']) {
      const { stdout, stderr } = await run({ DEBUG: spec })
      const token = stdout.trim()
      assert.ok(token.length >= 16, stdout)
      const traced = lines(stderr)
      const acquire = traced.find((line) => /EVALSHA acquire \[debug:k, \{debug:k\}(\\x[0-9a-f]{2})+fence\] \+\d+\.\d\dms ok$/.test(line))
      assert.ok(acquire, `${spec}: ${stderr}`)
      assert.ok(traced.some((line) => / EVALSHA release\w* \[debug:k/.test(line)), stderr)
      assert.ok(!stderr.includes(token), 'the token is never written')
    }
  })

  test("README's DEBUG sample lines are lines the library writes, but for their times", async () => {
    const readme = require('node:fs').readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')
    const section = readme.slice(readme.indexOf('**`DEBUG=native-redis-lock`**'))
    const sample = /```text\n([\s\S]*?)\n```/.exec(section)[1].split('\n')
    const { stdout, stderr } = await run({ DEBUG: 'native-redis-lock' }, 'debug-readme.js')
    assert.equal(stdout, 'done\n', stderr)
    const untimed = (line) => line.replace(/ \+\d+\.\d\dms /, ' ')
    const written = new Set(lines(stderr).map(untimed))
    for (const line of sample) assert.ok(written.has(untimed(line)), `not written: ${line}\n${stderr}`)
  })

  test("syncguard's lockId (it releases and extends) is never written: its index key is cut at :id:", async () => {
    const { stdout, stderr } = await run({ DEBUG: 'native-redis-lock' }, 'debug-trace-syncguard.js')
    const lockId = stdout.trim()
    assert.ok(lockId.length >= 16, stdout)
    const traced = lines(stderr)
    for (const name of ['sg_extend', 'sg_lookup', 'sg_release']) {
      assert.ok(traced.some((line) => line.includes(` EVALSHA ${name} [debug-sg:id:...`)), `${name}: ${stderr}`)
    }
    assert.ok(!stderr.includes(lockId), stderr)
  })

  test("every command sent has a line: counted against the server's INFO commandstats", async (t) => {
    // A server of its own: its counts are this fixture's alone.
    const own = await startRedis()
    t.after(() => own.close())
    const { stdout, stderr } = await new Promise((resolve, reject) => {
      const script = path.join(__dirname, 'fixtures', 'debug-every-call.js')
      execFile(process.execPath, [script, own.url], { env: { ...process.env, DEBUG: 'native-redis-lock' }, timeout: 20_000 }, (err, out, errOut) =>
        err ? reject(Object.assign(err, { stderr: errOut })) : resolve({ stdout: out, stderr: errOut }),
      )
    })
    assert.equal(stdout.trim(), 'done', stderr)
    // Each line: where it went, its commands ('; ' between those of one write), time, outcome.
    const traced = {}
    for (const line of lines(stderr)) {
      const m = / native-redis-lock (runtime|socket|sentinel) (.+) \+\d+\.\d\dms \S+$/.exec(line)
      assert.ok(m, line)
      for (const command of m[2].split('; ')) {
        const [name, sub] = command.split(' ')
        const counted = ['SCRIPT', 'CLIENT'].includes(name) ? `${name}|${sub}` : name
        traced[counted.toLowerCase()] = (traced[counted.toLowerCase()] ?? 0) + 1
      }
    }
    const client = new Redis(own.url)
    t.after(() => client.disconnect())
    const info = await client.info('commandstats')
    const calls = (name) => Number(new RegExp(`^cmdstat_${name.replace('|', '\\|')}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0)
    // The commands sent only from outside a script (commandstats also counts those a script
    // runs), and by nothing but the fixture's library (its SCRIPT FLUSH is not ours).
    const sent = ['hello', 'evalsha', 'eval', 'script|load', 'ssubscribe', 'subscribe', 'sunsubscribe', 'unsubscribe', 'multi', 'exec']
    const seen = Object.fromEntries(sent.map((name) => [name, traced[name] ?? 0]))
    const counted = Object.fromEntries(sent.map((name) => [name, calls(name)]))
    assert.deepEqual(seen, counted, stderr)
    // What the fixture makes sure of: the connections' HELLO, a wait's subscription, the
    // quarantine's EVAL, and NOSCRIPT answered by a SCRIPT LOAD and the call sent again.
    assert.ok(counted.hello >= 2 && counted.ssubscribe + counted.subscribe >= 1 && counted.eval >= 1, JSON.stringify(counted))
    // Lines of other connections (the JS thread's socket, the other lock's) may come between.
    const all = lines(stderr)
    const call = (line) => line.replace(/ \+.*$/, '')
    const noscript = all.filter((line) => line.endsWith(' NOSCRIPT'))
    assert.ok(noscript.length >= 1, stderr)
    for (const line of noscript) {
      const at = all.indexOf(line)
      const loaded = all.findIndex((later, i) => i > at && / runtime SCRIPT LOAD \+/.test(later))
      assert.ok(loaded > at, `no SCRIPT LOAD after ${line}`)
      assert.ok(all.some((later, i) => i > loaded && call(later) === call(line) && later.endsWith(' ok')), `${line}: not sent again`)
    }
  })

  test('a stderr pipe left unread until full holds the calls up, never loses them', async () => {
    // Node makes the pipe on fd 2 non-blocking: a full one must be waited out, not panic in
    // the callback that traced (which lost the call it was answering: a promise never settled).
    const PAIRS = 400
    const child = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'debug-trace-many.js'), server.url], {
      env: { ...process.env, DEBUG: 'native-redis-lock', PAIRS: String(PAIRS) },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    const exited = new Promise((resolve) => child.once('exit', resolve))
    // Unread: a pipe takes 64 KB at most, the trace of PAIRS pairs is over 60 KB. Shorter
    // than the second a line waits for a full pipe before it is dropped.
    await new Promise((resolve) => setTimeout(resolve, 700))
    let stderr = ''
    child.stderr.on('data', (chunk) => (stderr += chunk))
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    const code = await exited
    clearTimeout(timer)
    assert.equal(code, 0, `exit ${code} (killed after 30 s: hung): ${stderr.slice(-2_000)}`)
    assert.equal(stdout, 'done\n')
    // Held up, not dropped (but for a line that waited past a second under a heavy load).
    assert.ok(lines(stderr).length >= 2 * PAIRS - 2, `${lines(stderr).length} lines`)
    assert.ok(!stderr.includes('panicked'), stderr.slice(-2_000))
  })

  test('off without DEBUG, or when excluded', async () => {
    for (const env of [{ DEBUG: '' }, { DEBUG: '*,-native-redis-lock' }, { DEBUG: 'express' }]) {
      const { stderr } = await run(env)
      assert.deepEqual(lines(stderr), [], JSON.stringify(env))
    }
  })
})
