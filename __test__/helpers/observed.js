'use strict'

// What cluster.test.js and sentinel.test.js share to check stats, onEvent, logger and DEBUG on
// a backend past one Redis: the same observations, asserted the same way on each.
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFile } = require('node:child_process')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** An onEvent hook and a logger that record what they hear; `of(api, type)` filters the events. */
function recorder() {
  const events = []
  const logged = []
  const at = (level) => (message, fields) => logged.push([level, message, fields.type])
  const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }
  return {
    events,
    logged,
    logger,
    onEvent: (event) => events.push(event),
    of: (api, type) => events.filter((e) => e.api === api && e.type === type),
  }
}

/**
 * The events of one round of ExclusiveLock (lock key `exclusiveKey`: acquired, a rival
 * contended, released), DistributedLockService (`serviceKey`) and syncguard (`won` on 'k', a
 * contended attempt, an extend, then lock(fn) on 'fn'), and the logger's levels, lockId unsaid.
 */
async function checkObserved({ of, logged }, { exclusiveKey, serviceKey, won }) {
  // Contention comes from the native side through the thread's queue: it may come late.
  const deadline = Date.now() + 3000
  while ((of('ExclusiveLock', 'contended').length < 1 || of('syncguard', 'contended').length < 1) && Date.now() < deadline) await sleep(10)
  assert.deepEqual(of('ExclusiveLock', 'acquired').map((e) => e.key), [exclusiveKey])
  assert.equal(of('ExclusiveLock', 'contended').length, 1)
  assert.equal(of('ExclusiveLock', 'released').length, 1)
  assert.deepEqual(of('DistributedLockService', 'acquired').map((e) => e.key), [serviceKey])
  assert.deepEqual(of('DistributedLockService', 'released').map((e) => e.key), [serviceKey])
  assert.deepEqual(of('syncguard', 'acquired').map((e) => e.key), ['k', 'fn'])
  assert.equal(of('syncguard', 'acquired')[0].fence, won.fence)
  assert.equal(of('syncguard', 'contended').length, 1)
  assert.equal(of('syncguard', 'refreshed').length, 1)
  assert.equal(of('syncguard', 'released').length, 2)
  // The logger hears the same events, each at its level (the lockId never in it).
  for (const type of ['acquired', 'contended', 'released']) {
    assert.ok(logged.some(([level, , t]) => level === 'debug' && t === type), `${type}: ${JSON.stringify(logged)}`)
  }
  assert.ok(!JSON.stringify(logged).includes(won.lockId))
}

/**
 * Runs fixtures/debug-trace.js on `url` with DEBUG=native-redis-lock: its token (stdout), its
 * stderr, and the trace lines in it.
 */
async function debugTrace(url) {
  const script = path.join(__dirname, '..', 'fixtures', 'debug-trace.js')
  const { stdout, stderr } = await new Promise((resolve, reject) => {
    execFile(process.execPath, [script, url], { env: { ...process.env, DEBUG: 'native-redis-lock' }, timeout: 30_000 }, (err, out, errOut) =>
      err ? reject(Object.assign(err, { stderr: errOut })) : resolve({ stdout: out, stderr: errOut }),
    )
  })
  const token = stdout.trim()
  assert.ok(token.length >= 16, stdout)
  return { token, stderr, traced: stderr.split('\n').filter((line) => line.includes('native-redis-lock ')) }
}

/**
 * `service`'s turn, then `other`'s, which waited for it; `held()` checks where the key is while
 * `service` holds it. The one with a hook counts its own calls; the other, the wait it won.
 */
async function checkServiceTurns(service, other, held) {
  // Without a hook `other` may share the native service of its settings with earlier turns.
  const before = other.stats()
  assert.equal(await service.acquire(5000, 1), true)
  await held()
  const waiting = other.acquire(5000, 3000)
  await sleep(50)
  await service.release()
  assert.equal(await waiting, true)
  await other.release()
  assert.equal(service.stats().acquisitions, 1, JSON.stringify(service.stats()))
  const stats = other.stats()
  assert.equal(stats.acquisitions - before.acquisitions, 1, JSON.stringify(stats))
  assert.ok(stats.contended - before.contended >= 1, JSON.stringify(stats))
}

module.exports = { recorder, checkObserved, checkServiceTurns, debugTrace }
