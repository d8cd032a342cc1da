'use strict'

// The two syncguard entries as a user imports them (through package.json `exports`, CommonJS
// and ES modules alike): the names syncguard exports, the constants' values, the refusal at
// load under Bun. No Redis here.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')

const ROOT = [
  'lock', 'LockError', 'normalizeAndValidateKey', 'validateLockId', 'generateLockId', 'hashKey',
  'makeStorageKey', 'getByKey', 'getById', 'getByKeyRaw', 'getByIdRaw', 'owns', 'hasFence',
  'sanitizeLockInfo', 'withTelemetry', 'acquireHandle', 'decorateAcquireResult', 'isLive',
  'calculateRedisServerTimeMs', 'TIME_TOLERANCE_MS', 'LOCK_DEFAULTS', 'BACKEND_DEFAULTS',
  'BACKEND_LIMITS', 'FENCE_THRESHOLDS', 'MAX_KEY_LENGTH_BYTES', 'RESERVE_BYTES',
  'createRedisBackend', 'createLock',
].sort()
const REDIS = ['createLock', 'createRedisBackend']

test('both entries export syncguard\'s names, as CommonJS and as ES modules', async () => {
  const cjs = require('native-redis-lock/syncguard')
  assert.deepEqual(Object.keys(cjs).sort(), ROOT)
  const esm = await import('native-redis-lock/syncguard')
  assert.deepEqual(Object.keys(esm).sort(), ROOT)
  for (const name of ROOT) assert.equal(esm[name], cjs[name], name)
  const cjsRedis = require('native-redis-lock/syncguard/redis')
  assert.deepEqual(Object.keys(cjsRedis).sort(), REDIS)
  const esmRedis = await import('native-redis-lock/syncguard/redis')
  assert.deepEqual(Object.keys(esmRedis).sort(), REDIS)
  assert.equal(esmRedis.createRedisBackend, cjs.createRedisBackend)
  assert.equal(cjsRedis.createLock, cjs.createLock)
})

test("the constants hold syncguard's values, and are plain mutable objects", () => {
  const sg = require('native-redis-lock/syncguard')
  assert.equal(sg.MAX_KEY_LENGTH_BYTES, 512)
  assert.equal(sg.TIME_TOLERANCE_MS, 1000)
  assert.deepEqual(sg.BACKEND_LIMITS, { REDIS: 1000, POSTGRES: 1700, FIRESTORE: 1500 })
  assert.deepEqual(sg.RESERVE_BYTES, { REDIS: 26, POSTGRES: 0, FIRESTORE: 0 })
  assert.deepEqual(sg.BACKEND_DEFAULTS, { ttlMs: 30000 })
  assert.deepEqual(sg.LOCK_DEFAULTS, { maxRetries: 10, retryDelayMs: 100, timeoutMs: 5000, backoff: 'exponential', jitter: 'equal' })
  assert.deepEqual(sg.FENCE_THRESHOLDS, { MAX: '900000000000000', WARN: '090000000000000' })
  assert.equal(Object.isFrozen(sg.LOCK_DEFAULTS), false)
  assert.deepEqual(Object.keys(new sg.LockError('Internal')), ['code', 'context', 'name'])
})

test('a backend made from an entry has syncguard\'s capabilities and methods', () => {
  const { createRedisBackend } = require('native-redis-lock/syncguard/redis')
  const backend = createRedisBackend('memory://surface')
  assert.deepEqual(backend.capabilities, { backend: 'redis', supportsFencing: true, timeAuthority: 'server' })
  for (const name of ['acquire', 'release', 'extend', 'isLocked', 'lookup']) assert.equal(typeof backend[name], 'function', name)
  assert.notEqual(createRedisBackend('memory://surface').capabilities, backend.capabilities, 'a fresh object per backend')
})

test('under Bun, both entries throw a clear error at load', () => {
  for (const entry of ['native-redis-lock/syncguard', 'native-redis-lock/syncguard/redis']) {
    const script = `Object.defineProperty(process.versions, 'bun', { value: '1.2.0' }); require(${JSON.stringify(entry)})`
    const run = spawnSync(process.execPath, ['-e', script], { cwd: path.join(__dirname, '..'), encoding: 'utf8' })
    assert.notEqual(run.status, 0)
    assert.match(run.stderr, /native-redis-lock\/syncguard needs Node\.js .*Bun/)
  }
})
