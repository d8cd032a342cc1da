'use strict'

// The native binding makes its errors itself (src/binding/error.rs): a sync throw and a
// promise rejection are real Error objects whose `code` (and `argument`, `retriesAttempted`,
// `key`) are set before any JS of ours sees them; lib/errors.js only picks the class users
// match on from them. These tests call the raw binding, with no `error` hook registered,
// so nothing of lib/ stands between the native side and the assertions.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const native = require('../binding.js')
const { fromNative, LockAcquisitionError, LockError } = require('../lib/errors')

function rawLock(name, options = {}) {
  const completions = new native.NativeCompletions(performance.now())
  // Only the handle hook: a won lock resolves with its owner object, as given.
  completions.hook('handle', (owner) => owner)
  const heartbeat = new native.NativeHeartbeat()
  const url = `memory://native-errors-${process.pid}-${name}`
  const connection = new native.NativeConnection({ url }, completions)
  return new native.NativeDistributedLock(connection, { maxRetries: 0, retryDelayMs: 0, ...options }, heartbeat)
}

function marked(err) {
  const mark = Object.getOwnPropertyDescriptor(err, 'nativeRedisLock')
  assert.equal(mark?.value, true, 'marked as native')
  assert.equal(mark.enumerable, false, 'the mark is not enumerable')
}

test('a rejection carries its code, key and retriesAttempted from the native side', async () => {
  const lock = rawLock('locked')
  await lock.acquire({}, 'held', 10_000)
  const err = await lock.acquire({}, 'held', 10_000).then(
    () => assert.fail('acquired a held lock'),
    (e) => e,
  )
  assert.ok(err instanceof Error)
  assert.equal(Object.getPrototypeOf(err), Error.prototype, 'a plain Error: lib/ did not touch it')
  assert.equal(err.code, 'ELOCKED')
  assert.equal(err.key, 'held')
  assert.equal(err.retriesAttempted, 0)
  assert.equal(err.message, 'could not acquire lock "held" after 0 retries')
  assert.doesNotMatch(err.message, /^\[/, 'no code encoded in the message')
  marked(err)

  const mapped = fromNative(err)
  assert.ok(mapped instanceof LockAcquisitionError)
  assert.equal(mapped.code, 'ELOCKED')
  assert.equal(mapped.key, 'held')
  assert.equal(mapped.retriesAttempted, 0)
  assert.equal(mapped.message, 'Failed to acquire lock "held" after 0 retries')
})

test('a sync throw is a TypeError or RangeError with code EINVAL and argument, set natively', () => {
  const lock = rawLock('invalid')
  let thrown
  try {
    lock.acquire({}, '', 1000)
  } catch (e) {
    thrown = e
  }
  assert.ok(thrown instanceof TypeError, `a TypeError, got ${thrown}`)
  assert.equal(thrown.code, 'EINVAL')
  assert.equal(thrown.argument, 'key')
  assert.doesNotMatch(thrown.message, /^\[/)
  marked(thrown)

  assert.throws(() => lock.acquire({}, 'k', -1), (e) => {
    assert.ok(e instanceof RangeError, `a RangeError, got ${e}`)
    assert.equal(e.code, 'EINVAL')
    assert.equal(e.argument, 'ttlMs')
    marked(e)
    const mapped = fromNative(e)
    assert.ok(mapped instanceof RangeError)
    assert.equal(mapped.argument, 'ttlMs')
    assert.equal(mapped.message, e.message)
    assert.equal(Object.getOwnPropertyDescriptor(mapped, 'nativeRedisLock'), undefined, 'the mark stays native')
    return true
  })

  const connection = new native.NativeConnection({ url: 'memory://x' }, new native.NativeCompletions())
  assert.throws(() => new native.NativeDistributedLock(connection, { maxRetries: -1 }, new native.NativeHeartbeat()), {
    name: 'RangeError',
    code: 'EINVAL',
    argument: 'maxRetries',
  })
})

test('errors that are not ours pass through lib/errors.js untouched', () => {
  const mine = Object.assign(new Error('socket gone'), { code: 'ETIMEDOUT' })
  assert.equal(fromNative(mine), mine)
  assert.equal(fromNative(undefined), undefined)
  const already = new LockError('x', 'ECONNECTION')
  assert.equal(fromNative(already), already)
})

test('a call made after its environment ended (end(), as at process.exit()) throws EABORTED at once instead of pending forever', () => {
  // In a child: ending an environment is for good.
  const script = `
    const native = require(${JSON.stringify(require.resolve('../binding.js'))})
    const completions = new native.NativeCompletions(performance.now())
    completions.hook('handle', (owner) => owner)
    const heartbeat = new native.NativeHeartbeat()
    const connection = new native.NativeConnection({ url: 'memory://native-errors-ended-' + process.pid }, completions)
    const lock = new native.NativeDistributedLock(connection, { maxRetries: 0, retryDelayMs: 0 }, heartbeat)
    const exclusive = new native.NativeExclusiveLock(connection, { name: 'ended', keyPrefix: 'p', lockContents: '1', lockTtlMs: 3000, lockRefreshMs: 1000, maxStallMs: 0 }, heartbeat)
    completions.end()
    const outcomes = []
    for (const call of [() => lock.isLocked('k'), () => lock.tryAcquire({}, 'k', 1000), () => exclusive.inspect()]) {
      try {
        const pending = call()
        outcomes.push('returned ' + typeof pending)
      } catch (err) {
        outcomes.push(err.code)
      }
    }
    console.log(JSON.stringify(outcomes))
  `
  const { spawnSync } = require('node:child_process')
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.status, 0, run.stderr)
  assert.deepEqual(JSON.parse(run.stdout.trim()), ['EABORTED', 'EABORTED', 'EABORTED'])
})

test('the binding takes cluster and sentinels lists: both are opened lazily, naming what is wrong', () => {
  const open = (connection) => () => new native.NativeConnection(connection, new native.NativeCompletions())
  const refused = (connection, message) => {
    assert.throws(open(connection), (err) => {
      assert.equal(err.code, 'EINVAL', String(err))
      assert.match(err.message, message)
      assert.ok(!err.message.includes('hunter2'), err.message)
      return true
    })
  }
  // Nothing is dialled before the first call, so closed ports are no error here.
  assert.doesNotThrow(open({ cluster: [{ host: '127.0.0.1', port: 1 }, { host: '127.0.0.1' }], password: 'hunter2' }))
  assert.doesNotThrow(open({ sentinels: [{ host: '127.0.0.1', port: 1 }], sentinelName: 'm', sentinelPassword: 'hunter2' }))
  refused({ cluster: [{ host: 'a', port: 70000 }] }, /cluster\[0\]\.port must be from 0 to 65535/)
  refused({ cluster: [{ host: 'a' }], db: 1 }, /database 0 only/)
  refused({ sentinels: [{ host: 'a' }] }, /name is required with sentinels/)
})
