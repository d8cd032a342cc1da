'use strict'

// `native-redis-lock/syncguard/common`, as a user imports it: the names `syncguard/common`
// exports, and the behaviour of those the root entry does not have (the pieces a custom backend
// is built from). The names it shares with the root are the root's own functions, whose
// behaviour syncguard-helpers and syncguard-backend test. The custom backends here are plain
// objects: what is tested is the glue a custom backend uses, not a lock. createAutoLock runs on
// memory://, our engine's embedded keyspace.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')

const common = require('native-redis-lock/syncguard/common')
const root = require('native-redis-lock/syncguard')

const SHARED = Object.keys(root).filter((name) => name !== 'createRedisBackend' && name !== 'createLock')
const OWN = [
  'createAutoLock', 'formatFence', 'attachRawData', 'logFenceWarning', 'checkAborted', 'delay',
  'createDisposableHandle', 'mergeBackendConfig', 'mergeAcquisitionConfig', 'FAILURE_REASON',
  'mapToMutationResult', 'mapRedisScriptResult', 'mapFirestoreConditions', 'mapBackendObservation',
]
const LOCK_ID = 'AAAAAAAAAAAAAAAAAAAAAA'

test("the entry exports syncguard/common's names, as CommonJS and as an ES module", async () => {
  assert.deepEqual(Object.keys(common).sort(), [...SHARED, ...OWN].sort())
  for (const name of SHARED) assert.equal(common[name], root[name], name)
  assert.equal(common.createRedisBackend, undefined, 'Redis lives in syncguard/redis')
  const esm = await import('native-redis-lock/syncguard/common')
  assert.deepEqual(Object.keys(esm).sort(), Object.keys(common).sort())
  for (const name of Object.keys(common)) assert.equal(esm[name], common[name], name)
})

test('under Bun, the entry throws a clear error at load', () => {
  const script = "Object.defineProperty(process.versions, 'bun', { value: '1.2.0' }); require('native-redis-lock/syncguard/common')"
  const run = spawnSync(process.execPath, ['-e', script], { cwd: path.join(__dirname, '..'), encoding: 'utf8' })
  assert.notEqual(run.status, 0)
  assert.match(run.stderr, /native-redis-lock\/syncguard needs Node\.js .*Bun/)
})

test('formatFence pads to 15 digits, truncates numbers, refuses negatives and 16 digits', () => {
  assert.equal(common.formatFence(0), '000000000000000')
  assert.equal(common.formatFence(42.9), '000000000000042')
  assert.equal(common.formatFence(123n), '000000000000123')
  assert.equal(common.formatFence(999_999_999_999_999n), '999999999999999')
  assert.throws(() => common.formatFence(-1), { name: 'LockError', code: 'InvalidArgument', message: 'Fence must be non-negative' })
  assert.throws(() => common.formatFence(10n ** 15n), {
    code: 'InvalidArgument',
    message: 'Fence exceeds 15-digit limit: 1000000000000000',
  })
})

test('mergeBackendConfig and mergeAcquisitionConfig fill defaults read at each call', () => {
  assert.deepEqual(common.mergeBackendConfig({}), { ttlMs: 30000 })
  assert.deepEqual(common.mergeBackendConfig({ ttlMs: 5 }), { ttlMs: 5 })
  const signal = new AbortController().signal
  assert.deepEqual(common.mergeAcquisitionConfig(undefined), {
    maxRetries: 10, retryDelayMs: 100, timeoutMs: 5000, backoff: 'exponential', jitter: 'equal', signal: undefined,
  })
  assert.deepEqual(common.mergeAcquisitionConfig({ maxRetries: 0, jitter: 'none', signal }), {
    maxRetries: 0, retryDelayMs: 100, timeoutMs: 5000, backoff: 'exponential', jitter: 'none', signal,
  })
  const saved = { ...common.LOCK_DEFAULTS }
  const savedTtl = common.BACKEND_DEFAULTS.ttlMs
  try {
    common.LOCK_DEFAULTS.retryDelayMs = 7
    common.BACKEND_DEFAULTS.ttlMs = 9
    assert.equal(common.mergeAcquisitionConfig({}).retryDelayMs, 7)
    assert.equal(common.mergeBackendConfig({ ttlMs: null }).ttlMs, 9)
  } finally {
    Object.assign(common.LOCK_DEFAULTS, saved)
    common.BACKEND_DEFAULTS.ttlMs = savedTtl
  }
})

test('the mappers turn script codes and document reads into conditions, and conditions into results', () => {
  assert.equal(common.mapRedisScriptResult(1), 'succeeded')
  assert.equal(common.mapRedisScriptResult(0), 'ownership-mismatch')
  assert.equal(common.mapRedisScriptResult(-1), 'never-existed')
  assert.equal(common.mapRedisScriptResult(-2), 'observable-expired')
  assert.equal(common.mapRedisScriptResult(5), 'ambiguous-unknown')
  const read = (documentExists, ownershipValid, isLive) => common.mapFirestoreConditions({ documentExists, ownershipValid, isLive })
  assert.equal(read(false, true, true), 'never-existed')
  assert.equal(read(true, false, true), 'ownership-mismatch')
  assert.equal(read(true, true, false), 'observable-expired')
  assert.equal(read(true, true, true), 'succeeded')
  assert.equal(common.mapBackendObservation(-2), 'observable-expired')
  assert.equal(common.mapBackendObservation({ documentExists: true, ownershipValid: false, isLive: true }), 'ownership-mismatch')
  assert.deepEqual(common.mapToMutationResult('succeeded'), { ok: true })
  assert.deepEqual(common.mapToMutationResult('observable-expired'), { ok: false, reason: 'expired' })
  for (const cond of ['never-existed', 'ownership-mismatch', 'cleaned-up-after-expiry', 'ambiguous-unknown', 'other']) {
    assert.deepEqual(common.mapToMutationResult(cond), { ok: false, reason: 'not-found' }, cond)
  }
})

test('a custom backend tagging results with FAILURE_REASON gets that reason in telemetry', async () => {
  const failed = { ok: false }
  failed[common.FAILURE_REASON] = { reason: 'expired' }
  const backend = {
    capabilities: { supportsFencing: false, timeAuthority: 'client' },
    release: async () => failed,
  }
  const events = []
  const watched = common.withTelemetry(backend, { onEvent: (event) => events.push(event) })
  assert.equal(await watched.release({ lockId: LOCK_ID }), failed)
  assert.equal(typeof common.FAILURE_REASON, 'symbol')
  assert.deepEqual(events.map(({ type, result, reason }) => ({ type, result, reason })), [
    { type: 'release', result: 'fail', reason: 'expired' },
  ])
})

test('attachRawData makes getByKeyRaw show the raw key and lockId; checkAborted, delay, logFenceWarning', async () => {
  const info = { keyHash: 'h', lockIdHash: 'i', expiresAtMs: 2, acquiredAtMs: 1 }
  assert.equal(common.attachRawData(info, { key: 'k', lockId: LOCK_ID }), info)
  const backend = { lookup: async () => info }
  assert.deepEqual(await common.getByKeyRaw(backend, 'k'), { ...info, key: 'k', lockId: LOCK_ID })
  assert.deepEqual(Object.keys(info), ['keyHash', 'lockIdHash', 'expiresAtMs', 'acquiredAtMs'], 'the raw data stays off the keys')

  common.checkAborted(undefined)
  common.checkAborted(new AbortController().signal)
  const aborted = new AbortController()
  aborted.abort()
  assert.throws(() => common.checkAborted(aborted.signal), { name: 'LockError', code: 'Aborted', message: 'Operation aborted by signal' })

  const started = Date.now()
  assert.equal(await common.delay(30), undefined)
  assert.ok(Date.now() - started >= 25)

  const warnings = []
  const warn = console.warn
  console.warn = (line) => warnings.push(line)
  try {
    common.logFenceWarning('090000000000001', 'k')
  } finally {
    console.warn = warn
  }
  assert.deepEqual(warnings, ['[SyncGuard] Fence counter approaching limit: fence=090000000000001, key=k, max=900000000000000'])
})

test('createDisposableHandle releases once, by the lockId of the result', async () => {
  const calls = []
  const backend = {
    release: async (op) => (calls.push(['release', op.lockId]), { ok: true }),
    extend: async (op) => (calls.push(['extend', op.lockId, op.ttlMs]), { ok: true, expiresAtMs: 9 }),
  }
  const won = { ok: true, lockId: LOCK_ID, expiresAtMs: 5, fence: '000000000000001' }
  const handle = common.createDisposableHandle(backend, won, 'k')
  assert.notEqual(handle, won)
  assert.equal(handle.fence, won.fence)
  assert.deepEqual(await handle.extend(100), { ok: true, expiresAtMs: 9 })
  assert.deepEqual(await handle.release(), { ok: true })
  assert.deepEqual(await handle.release(), { ok: false }, 'a second release makes no call')
  await handle[Symbol.asyncDispose]()
  assert.deepEqual(calls, [['extend', LOCK_ID, 100], ['release', LOCK_ID]])
})

test('createAutoLock binds lock() to a backend (memory://)', async () => {
  const { createRedisBackend } = require('native-redis-lock/syncguard/redis')
  const backend = createRedisBackend('memory://sg-common-auto')
  const withLock = common.createAutoLock(backend)
  const seen = await withLock(async () => backend.isLocked({ key: 'auto' }), { key: 'auto', ttlMs: 5000 })
  assert.equal(seen, true, 'fn ran under the lock')
  assert.equal(await backend.isLocked({ key: 'auto' }), false, 'released after')
  await assert.rejects(withLock(() => 1, { key: '' }), { code: 'InvalidArgument', message: 'Key must not be empty' })
})
