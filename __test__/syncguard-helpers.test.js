'use strict'

// syncguard's pure helpers (lib/syncguard), which must behave as syncguard 2.5.2's do: every
// message, the key derivations to the byte, decoration and disposal, telemetry. No Redis here:
// the backends below are plain objects recording their calls, because what is tested is the JS
// glue around a backend, not a lock's behaviour (that is in the other syncguard-* tests).
const { test, describe } = require('node:test')
const assert = require('node:assert/strict')
const { createHash } = require('node:crypto')

const sg = {
  ...require('../lib/syncguard/constants'),
  ...require('../lib/syncguard/errors'),
  ...require('../lib/syncguard/validation'),
  ...require('../lib/syncguard/keys'),
  ...require('../lib/syncguard/time'),
  ...require('../lib/syncguard/helpers'),
  ...require('../lib/syncguard/disposable'),
  ...require('../lib/syncguard/telemetry'),
}
const { FAILURE_REASON, failedWith } = require('../lib/syncguard/failure-reason')

const LOCK_ID = 'AAAAAAAAAAAAAAAAAAAAAA' // 22 base64url characters
const OTHER_ID = 'abcdefghijklmnopqrstu_'
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** `fn` throws synchronously a syncguard LockError with this code and message, and no context. */
function throwsLockError(fn, code, message) {
  assert.throws(fn, (err) => {
    assert.ok(err instanceof sg.LockError)
    assert.equal(err.name, 'LockError')
    assert.equal(err.code, code)
    assert.equal(err.message, message)
    assert.equal(err.context, undefined)
    return true
  })
}

/** A promise with its resolve and reject at hand. */
function deferred() {
  let resolve
  let reject
  const promise = new Promise((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/**
 * A backend of plain functions: each call is recorded in `calls` (name and the options object
 * as given), and answers what `answers[name]` returns (a value, a promise, or a throw).
 */
function recordingBackend(answers = {}) {
  const calls = []
  const method = (name, fallback) => (opts) => {
    calls.push({ name, opts })
    return (answers[name] ?? fallback)(opts)
  }
  return {
    calls,
    backend: {
      acquire: method('acquire', async () => ({ ok: true, lockId: LOCK_ID, expiresAtMs: 1000 })),
      release: method('release', async () => ({ ok: true })),
      extend: method('extend', async (o) => ({ ok: true, expiresAtMs: 2000 + o.ttlMs })),
      isLocked: method('isLocked', async () => true),
      lookup: method('lookup', async () => null),
      capabilities: { supportsFencing: true, timeAuthority: 'server' },
    },
  }
}

describe('constants', () => {
  test('have syncguard 2.5.2 values', () => {
    assert.equal(sg.MAX_KEY_LENGTH_BYTES, 512)
    assert.deepEqual(sg.BACKEND_LIMITS, { REDIS: 1000, POSTGRES: 1700, FIRESTORE: 1500 })
    assert.deepEqual(sg.RESERVE_BYTES, { REDIS: 26, POSTGRES: 0, FIRESTORE: 0 })
    assert.deepEqual(sg.BACKEND_DEFAULTS, { ttlMs: 30000 })
    assert.deepEqual(sg.LOCK_DEFAULTS, {
      maxRetries: 10,
      retryDelayMs: 100,
      timeoutMs: 5000,
      backoff: 'exponential',
      jitter: 'equal',
    })
    assert.deepEqual(sg.FENCE_THRESHOLDS, { MAX: '900000000000000', WARN: '090000000000000' })
    assert.equal(sg.TIME_TOLERANCE_MS, 1000)
  })

  test('are plain mutable objects, as syncguard leaves them', () => {
    for (const value of [sg.BACKEND_LIMITS, sg.RESERVE_BYTES, sg.BACKEND_DEFAULTS, sg.LOCK_DEFAULTS, sg.FENCE_THRESHOLDS]) {
      assert.equal(Object.isFrozen(value), false)
    }
    const before = sg.BACKEND_DEFAULTS.ttlMs
    sg.BACKEND_DEFAULTS.ttlMs = 1234
    try {
      assert.equal(require('../lib/syncguard/constants').BACKEND_DEFAULTS.ttlMs, 1234)
    } finally {
      sg.BACKEND_DEFAULTS.ttlMs = before
    }
  })
})

describe('LockError', () => {
  test('own keys in syncguard order, message defaulting to the code', () => {
    const err = new sg.LockError('Internal')
    assert.deepEqual(Object.keys(err), ['code', 'context', 'name'])
    assert.ok(Object.hasOwn(err, 'context'))
    assert.equal(err.context, undefined)
    assert.equal(err.message, 'Internal')
    assert.equal(err.name, 'LockError')
    assert.ok(err instanceof Error)
    assert.match(err.stack, /^LockError: Internal/)
  })

  test('keeps the message and context given', () => {
    const cause = new Error('boom')
    const err = new sg.LockError('NetworkTimeout', 'Redis timeout: boom', { key: 'k', cause })
    assert.equal(err.message, 'Redis timeout: boom')
    assert.equal(err.code, 'NetworkTimeout')
    assert.deepEqual(err.context, { key: 'k', cause })
    assert.equal(new sg.LockError('Aborted', '').message, '')
  })

  test('is not the root LockError of the package', () => {
    const root = require('../lib/errors')
    assert.notEqual(sg.LockError, root.LockError)
  })
})

describe('normalizeAndValidateKey', () => {
  test('refuses non-strings, empty and over-long keys with syncguard messages', () => {
    for (const bad of [undefined, null, 42, {}, ['k'], Symbol('k')]) {
      throwsLockError(() => sg.normalizeAndValidateKey(bad), 'InvalidArgument', 'Key must be a string')
    }
    throwsLockError(() => sg.normalizeAndValidateKey(''), 'InvalidArgument', 'Key must not be empty')
    const tooLong = 'Key exceeds maximum length of 512 bytes after normalization'
    throwsLockError(() => sg.normalizeAndValidateKey('k'.repeat(513)), 'InvalidArgument', tooLong)
    // 'é' is 2 UTF-8 bytes: 256 of them are 512 bytes, one more ASCII byte is too many.
    throwsLockError(() => sg.normalizeAndValidateKey('é'.repeat(256) + 'a'), 'InvalidArgument', tooLong)
    // 128 emoji: 256 UTF-16 units, 512 UTF-8 bytes.
    assert.equal(sg.normalizeAndValidateKey('\u{1F600}'.repeat(128)), '\u{1F600}'.repeat(128))
    throwsLockError(() => sg.normalizeAndValidateKey('\u{1F600}'.repeat(128) + 'a'), 'InvalidArgument', tooLong)
  })

  test('returns the NFC form and measures it after normalising', () => {
    assert.equal(sg.normalizeAndValidateKey('k'.repeat(512)), 'k'.repeat(512))
    assert.equal(sg.normalizeAndValidateKey('cafe\u0301'), 'caf\u00e9')
    // NFD 'e' + U+0301 is 3 bytes, NFC 'é' 2: 200 of them are 600 bytes before, 400 after.
    assert.equal(sg.normalizeAndValidateKey('e\u0301'.repeat(200)), '\u00e9'.repeat(200))
    assert.equal(sg.normalizeAndValidateKey(' '), ' ')
  })
})

describe('validateLockId', () => {
  test('accepts 22 base64url characters', () => {
    assert.equal(sg.validateLockId(LOCK_ID), undefined)
    assert.equal(sg.validateLockId(OTHER_ID), undefined)
    assert.equal(sg.validateLockId('-'.repeat(22)), undefined)
  })

  test('refuses anything else, quoting it or "empty/null"', () => {
    const message = (shown) => `Invalid lockId format. Expected 22 base64url characters, got: ${shown}`
    for (const falsy of [undefined, null, '', 0, false]) {
      throwsLockError(() => sg.validateLockId(falsy), 'InvalidArgument', message('empty/null'))
    }
    const cases = ['A'.repeat(21), 'A'.repeat(23), 'A'.repeat(21) + '=', 'A'.repeat(21) + '+', 'A'.repeat(21) + '/', 'A'.repeat(21) + 'é']
    for (const bad of cases) {
      throwsLockError(() => sg.validateLockId(bad), 'InvalidArgument', message(bad))
    }
    throwsLockError(() => sg.validateLockId(42), 'InvalidArgument', message('42'))
    throwsLockError(() => sg.validateLockId([LOCK_ID]), 'InvalidArgument', message(LOCK_ID))
  })
})

describe('hashKey', () => {
  test('gives syncguard vectors: three 32-bit rolling hashes in hex', () => {
    assert.equal(sg.hashKey(''), '000000000000000000000000')
    assert.equal(sg.hashKey('abc'), '0001786200483126a9ab02ae')
    assert.equal(sg.hashKey('resource:42'), '4994f96ace8a5e5ee0aefa06')
    assert.equal(sg.hashKey('x'.repeat(1000)), '99c0cc00248790003b450000')
    // An astral character is hashed as its two UTF-16 code units.
    assert.equal(sg.hashKey('\u{1F600}'), '001b0d6301446cc92f4d8055')
  })

  test('agrees with the formula written out, and hashes the NFC form', () => {
    const part = (text, shift, weight) => {
      let h = 0
      for (let i = 0; i < text.length; i++) h = Math.imul(h, 2 ** shift - 1) + text.charCodeAt(i) * weight | 0
      return (h >>> 0).toString(16).padStart(8, '0')
    }
    for (const text of ['abc', 'user:1234567890', '\u00e9t\u00e9', '\u{1F600}x']) {
      assert.equal(sg.hashKey(text), part(text, 5, 1) + part(text, 7, 3) + part(text, 11, 7))
    }
    assert.equal(sg.hashKey('cafe\u0301'), sg.hashKey('caf\u00e9'))
    assert.equal(sg.hashKey('caf\u00e9'), '002e7a21248b3503a22cdb87')
    assert.match(sg.hashKey('anything at all'), /^[0-9a-f]{24}$/)
  })
})

describe('generateLockId', () => {
  test('draws 22 base64url characters that validateLockId accepts, all different', () => {
    const seen = new Set()
    for (let i = 0; i < 1000; i++) {
      const id = sg.generateLockId()
      assert.match(id, /^[A-Za-z0-9_-]{22}$/)
      sg.validateLockId(id)
      seen.add(id)
    }
    assert.equal(seen.size, 1000)
  })
})

describe('makeStorageKey', () => {
  const { REDIS: LIMIT } = sg.BACKEND_LIMITS
  const { REDIS: RESERVE } = sg.RESERVE_BYTES
  /** The hashed form: the first 16 bytes of SHA-256 of the prefixed key, base64url. */
  const digest = (prefixed) => createHash('sha256').update(prefixed, 'utf8').digest().subarray(0, 16).toString('base64url')

  test('joins prefix and NFC key with one colon, dropping trailing colons', () => {
    assert.equal(sg.makeStorageKey('syncguard', 'user:1', LIMIT, RESERVE), 'syncguard:user:1')
    assert.equal(sg.makeStorageKey('app:::', 'k', LIMIT, RESERVE), 'app:k')
    assert.equal(sg.makeStorageKey('', 'k', LIMIT, RESERVE), 'k')
    assert.equal(sg.makeStorageKey(':::', 'k', LIMIT, RESERVE), 'k')
    assert.equal(sg.makeStorageKey(':a:', ':k:', LIMIT, RESERVE), ':a::k:')
    assert.equal(sg.makeStorageKey('p', 'cafe\u0301', LIMIT, RESERVE), 'p:caf\u00e9')
    // The default prefix never hashes: 9 + 1 + 512 + 26 bytes stay under 1000.
    const longest = 'é'.repeat(256)
    assert.equal(sg.makeStorageKey('syncguard', longest, LIMIT, RESERVE), `syncguard:${longest}`)
  })

  test('hashes from 975 bytes with the Redis limits (974 stays plain)', () => {
    const prefix = 'p'.repeat(470)
    const plain = `${prefix}:${'k'.repeat(503)}` // 974 bytes
    assert.equal(sg.makeStorageKey(prefix, 'k'.repeat(503), LIMIT, RESERVE), plain)
    const long = `${prefix}:${'k'.repeat(504)}` // 975 bytes
    const hashed = sg.makeStorageKey(prefix, 'k'.repeat(504), LIMIT, RESERVE)
    assert.equal(hashed, `${prefix}:${digest(long)}`)
    assert.equal(hashed, `${prefix}:Jx1mELfARt8L31zOEFzsJw`)
  })

  test('hashes the NFC bytes of the whole prefixed key, and an empty prefix alone', () => {
    // 'pre:' + 20 NFC 'é' is 44 bytes (64 in NFD): over 30, hashed to 'pre:' + 22.
    const key = 'e\u0301'.repeat(20)
    const nfc = '\u00e9'.repeat(20)
    assert.equal(sg.makeStorageKey('pre', key, 30, 0), `pre:${digest(`pre:${nfc}`)}`)
    assert.equal(sg.makeStorageKey('', 'k'.repeat(40), 30, 0), digest('k'.repeat(40)))
  })

  test('the index key of a 949 to 951-byte prefix is hashed; from 952 it cannot fit', () => {
    const index = `id:${LOCK_ID}` // 25 bytes
    assert.equal(sg.makeStorageKey('p'.repeat(948), index, LIMIT, RESERVE), `${'p'.repeat(948)}:${index}`)
    for (const length of [949, 951]) {
      const prefix = 'p'.repeat(length)
      assert.equal(sg.makeStorageKey(prefix, index, LIMIT, RESERVE), `${prefix}:${digest(`${prefix}:${index}`)}`)
    }
    throwsLockError(
      () => sg.makeStorageKey('p'.repeat(952), index, LIMIT, RESERVE),
      'InvalidArgument',
      'Key exceeds backend limits even after hashing (prefix too long).',
    )
  })

  test('refuses an empty key, then a prefix leaving no room', () => {
    throwsLockError(() => sg.makeStorageKey('p', '', LIMIT, RESERVE), 'InvalidArgument', 'Key must not be empty')
    throwsLockError(() => sg.makeStorageKey('p'.repeat(5000), '', LIMIT, RESERVE), 'InvalidArgument', 'Key must not be empty')
    const prefixTooLong = 'Prefix exceeds backend limit after accounting for reserved bytes. Use a shorter prefix.'
    // 974 + ':' + 26 reserved = 1001 bytes.
    throwsLockError(() => sg.makeStorageKey('p'.repeat(974), 'k', LIMIT, RESERVE), 'InvalidArgument', prefixTooLong)
    // Trailing colons do not count: 973 + 1 + 26 = 1000 fits, but the key then cannot.
    throwsLockError(
      () => sg.makeStorageKey(`${'p'.repeat(973)}::`, 'k', LIMIT, RESERVE),
      'InvalidArgument',
      'Key exceeds backend limits even after hashing (prefix too long).',
    )
    throwsLockError(() => sg.makeStorageKey('', 'k', 10, 11), 'InvalidArgument', prefixTooLong)
  })
})

describe('time', () => {
  test('isLive is expiresAtMs > nowMs - toleranceMs', () => {
    assert.equal(sg.isLive(1000, 1999, 1000), true)
    assert.equal(sg.isLive(1000, 2000, 1000), false)
    assert.equal(sg.isLive(1000, 1000, 0), false)
    assert.equal(sg.isLive(1001, 1000, 0), true)
  })

  test('calculateRedisServerTimeMs turns TIME into whole milliseconds', () => {
    assert.equal(sg.calculateRedisServerTimeMs(['1700000000', '123456']), 1700000000123)
    assert.equal(sg.calculateRedisServerTimeMs(['1700000000', '999999']), 1700000000999)
    assert.equal(sg.calculateRedisServerTimeMs(['0', '0']), 0)
    assert.equal(sg.calculateRedisServerTimeMs([5, 1500]), 5001)
  })
})

describe('lookup helpers', () => {
  test('getByKey and getById spread the options after the query', async () => {
    const { backend, calls } = recordingBackend()
    const signal = new AbortController().signal
    await sg.getByKey(backend, 'k')
    await sg.getByKey(backend, 'k', { signal })
    await sg.getById(backend, LOCK_ID, { signal })
    await sg.getByKey(backend, 'k', { key: 'replaced' })
    assert.deepEqual(calls.map((c) => c.opts), [
      { key: 'k' },
      { key: 'k', signal },
      { lockId: LOCK_ID, signal },
      { key: 'replaced' },
    ])
  })

  test('the raw lookups read the registered raw-data symbol', async () => {
    assert.equal(sg.RAW_DATA, Symbol.for('syncguard.rawData'))
    const info = sg.sanitizeLockInfo(
      { key: 'k', lockId: LOCK_ID, expiresAtMs: 2, acquiredAtMs: 1, fence: '000000000000007' },
      { supportsFencing: true },
    )
    assert.equal(sg.attachRawData(info, { key: 'k', lockId: LOCK_ID }), info)
    const { backend } = recordingBackend({ lookup: async () => info })
    for (const raw of [await sg.getByKeyRaw(backend, 'k'), await sg.getByIdRaw(backend, LOCK_ID)]) {
      assert.equal(raw.key, 'k')
      assert.equal(raw.lockId, LOCK_ID)
      assert.equal(raw.keyHash, sg.hashKey('k'))
      assert.equal(raw.fence, '000000000000007')
    }
    // The lookup itself shows no raw key or lockId.
    assert.deepEqual(Object.keys(info), ['keyHash', 'lockIdHash', 'expiresAtMs', 'acquiredAtMs', 'fence'])
  })

  test('without raw data: the queried field and a placeholder; null stays null', async () => {
    const info = { keyHash: 'h', lockIdHash: 'i', expiresAtMs: 2, acquiredAtMs: 1 }
    const { backend } = recordingBackend({ lookup: async () => ({ ...info }) })
    assert.deepEqual(await sg.getByKeyRaw(backend, 'k'), {
      ...info,
      key: 'k',
      lockId: '[backend does not provide raw lockId]',
    })
    assert.deepEqual(await sg.getByIdRaw(backend, LOCK_ID), {
      ...info,
      key: '[backend does not provide raw key]',
      lockId: LOCK_ID,
    })
    const empty = recordingBackend().backend
    assert.equal(await sg.getByKeyRaw(empty, 'k'), null)
    assert.equal(await sg.getByIdRaw(empty, LOCK_ID), null)
  })

  test('owns is a lookup by lockId that found something', async () => {
    const found = recordingBackend({ lookup: async () => ({ keyHash: 'h' }) })
    assert.equal(await sg.owns(found.backend, LOCK_ID), true)
    assert.deepEqual(found.calls[0].opts, { lockId: LOCK_ID })
    assert.equal(await sg.owns(recordingBackend().backend, LOCK_ID), false)
  })

  test('hasFence wants a won result with a non-empty fence', () => {
    assert.equal(sg.hasFence({ ok: true, lockId: LOCK_ID, expiresAtMs: 1, fence: '000000000000001' }), true)
    assert.equal(sg.hasFence({ ok: true, lockId: LOCK_ID, expiresAtMs: 1, fence: '' }), false)
    assert.equal(sg.hasFence({ ok: true, lockId: LOCK_ID, expiresAtMs: 1 }), false)
    assert.equal(sg.hasFence({ ok: false, reason: 'locked' }), false)
  })

  test('sanitizeLockInfo hashes key and lockId; fence only with fencing capability', () => {
    const raw = { key: 'k', lockId: LOCK_ID, expiresAtMs: 20, acquiredAtMs: 10, fence: '000000000000003' }
    const base = { keyHash: sg.hashKey('k'), lockIdHash: sg.hashKey(LOCK_ID), expiresAtMs: 20, acquiredAtMs: 10 }
    assert.deepEqual(sg.sanitizeLockInfo(raw, { supportsFencing: true }), { ...base, fence: '000000000000003' })
    assert.deepEqual(sg.sanitizeLockInfo(raw, { supportsFencing: false }), base)
    assert.deepEqual(sg.sanitizeLockInfo({ ...raw, fence: undefined }, { supportsFencing: true }), base)
  })

  test('checkAborted and logFenceWarning say what syncguard backends say', (t) => {
    sg.checkAborted(undefined)
    sg.checkAborted(new AbortController().signal)
    const controller = new AbortController()
    controller.abort()
    throwsLockError(() => sg.checkAborted(controller.signal), 'Aborted', 'Operation aborted by signal')
    const warn = t.mock.method(console, 'warn', () => {})
    sg.logFenceWarning('090000000000001', 'k')
    assert.deepEqual(warn.mock.calls[0].arguments, [
      '[SyncGuard] Fence counter approaching limit: fence=090000000000001, key=k, max=900000000000000',
    ])
  })
})

describe('decoration', () => {
  const won = () => ({ ok: true, lockId: LOCK_ID, expiresAtMs: 5000, fence: '000000000000001' })

  test('a lost acquisition gets no-ops on the same object', async () => {
    const { backend, calls } = recordingBackend()
    const lost = { ok: false, reason: 'locked' }
    const decorated = sg.decorateAcquireResult(backend, lost, 'k')
    assert.equal(decorated, lost)
    assert.deepEqual(await decorated.release(), { ok: false })
    assert.deepEqual(await decorated.extend(1000), { ok: false })
    assert.equal(await decorated[Symbol.asyncDispose](), undefined)
    assert.deepEqual(calls, [])
  })

  test('a won acquisition becomes a new handle; release goes once, then answers ok: false', async () => {
    const { backend, calls } = recordingBackend()
    const result = won()
    const handle = sg.decorateAcquireResult(backend, result, 'k')
    assert.notEqual(handle, result)
    assert.deepEqual(Object.keys(result), ['ok', 'lockId', 'expiresAtMs', 'fence'])
    assert.deepEqual(
      { ok: handle.ok, lockId: handle.lockId, expiresAtMs: handle.expiresAtMs, fence: handle.fence },
      result,
    )
    const signal = new AbortController().signal
    assert.deepEqual(await handle.release(signal), { ok: true })
    assert.deepEqual(await handle.release(), { ok: false })
    await handle[Symbol.asyncDispose]()
    assert.deepEqual(calls, [{ name: 'release', opts: { lockId: LOCK_ID, signal } }])
  })

  test('release passes the backend answer and error through, and still counts as done', async () => {
    const failing = recordingBackend({ release: async () => { throw new Error('down') } })
    const handle = sg.decorateAcquireResult(failing.backend, won(), 'k')
    await assert.rejects(handle.release(), /down/)
    assert.deepEqual(await handle.release(), { ok: false })
    await handle[Symbol.asyncDispose]()
    assert.equal(failing.calls.length, 1)

    const notHeld = recordingBackend({ release: async () => ({ ok: false }) })
    assert.deepEqual(await sg.decorateAcquireResult(notHeld.backend, won(), 'k').release(), { ok: false })

    const throwsAtOnce = recordingBackend({ release: () => { throw new TypeError('sync') } })
    const other = sg.decorateAcquireResult(throwsAtOnce.backend, won(), 'k')
    const pending = other.release()
    assert.ok(pending instanceof Promise)
    await assert.rejects(pending, TypeError)
    assert.deepEqual(await other.release(), { ok: false })
  })

  test('extend always calls the backend, even after release', async () => {
    const { backend, calls } = recordingBackend()
    const handle = sg.decorateAcquireResult(backend, won(), 'k')
    assert.deepEqual(await handle.extend(1000), { ok: true, expiresAtMs: 3000 })
    await handle.release()
    await handle.extend(500)
    assert.deepEqual(calls.map((c) => c.opts), [
      { lockId: LOCK_ID, ttlMs: 1000, signal: undefined },
      { lockId: LOCK_ID, signal: undefined },
      { lockId: LOCK_ID, ttlMs: 500, signal: undefined },
    ])
  })

  test('disposal releases once, with no signal, however often it is asked', async () => {
    const { backend, calls } = recordingBackend()
    const handle = sg.decorateAcquireResult(backend, won(), 'k')
    const first = handle[Symbol.asyncDispose]()
    const second = handle[Symbol.asyncDispose]()
    assert.equal(await first, undefined)
    assert.equal(await second, undefined)
    await handle[Symbol.asyncDispose]()
    assert.deepEqual(await handle.release(), { ok: false })
    assert.equal(calls.length, 1)
    assert.deepEqual(Object.keys(calls[0].opts), ['lockId'])
  })

  test('disposal during release waits for that release and sends nothing', async () => {
    const gate = deferred()
    const { backend, calls } = recordingBackend({ release: () => gate.promise })
    const handle = sg.decorateAcquireResult(backend, won(), 'k')
    const releasing = handle.release()
    let disposed = false
    const disposing = handle[Symbol.asyncDispose]().then(() => { disposed = true })
    await sleep(10)
    assert.equal(disposed, false)
    gate.resolve({ ok: true })
    await disposing
    assert.deepEqual(await releasing, { ok: true })
    assert.equal(calls.length, 1)
  })

  test('disposal errors go to onReleaseError, normalised, and never out', async () => {
    const seen = []
    const onReleaseError = (error, context) => seen.push({ error, context })
    const failing = recordingBackend({ release: async () => { throw new Error('down') } })
    await sg.decorateAcquireResult(failing.backend, won(), 'the-key', onReleaseError)[Symbol.asyncDispose]()
    assert.equal(seen[0].error.message, 'down')
    assert.deepEqual(seen[0].context, { lockId: LOCK_ID, key: 'the-key', source: 'disposal' })

    const odd = recordingBackend({ release: async () => { throw 'text' } }) // eslint-disable-line no-throw-literal
    await sg.decorateAcquireResult(odd.backend, won(), 'k', onReleaseError)[Symbol.asyncDispose]()
    assert.ok(seen[1].error instanceof Error)
    assert.equal(seen[1].error.message, 'text')
    assert.equal(seen[1].error.originalError, 'text')

    const rude = () => { throw new Error('callback') }
    const handle = sg.decorateAcquireResult(failing.backend, won(), 'k', rude)
    assert.equal(await handle[Symbol.asyncDispose](), undefined)
  })

  test('disposeTimeoutMs: a stalled release stops the wait, aborts its signal, and reports a late error', async () => {
    const gate = deferred()
    const { backend, calls } = recordingBackend({ release: () => gate.promise })
    const seen = []
    const handle = sg.decorateAcquireResult(backend, won(), 'k', (error) => seen.push(error), 50)
    const started = Date.now()
    await handle[Symbol.asyncDispose]()
    const waited = Date.now() - started
    assert.ok(waited >= 45 && waited < 2000, `disposal waited ${waited} ms`)
    assert.equal(calls[0].opts.signal.aborted, true)
    await handle[Symbol.asyncDispose]() // disposed: nothing more
    assert.deepEqual(await handle.release(), { ok: false })
    assert.equal(calls.length, 1)
    gate.reject(new Error('late'))
    await sleep(10)
    assert.deepEqual(seen.map((e) => e.message), ['late'])
  })

  test('disposeTimeoutMs: an early success or failure ends the wait at once', async () => {
    const seen = []
    const quick = recordingBackend()
    const started = Date.now()
    await sg.decorateAcquireResult(quick.backend, won(), 'k', (e) => seen.push(e), 60000)[Symbol.asyncDispose]()
    assert.equal(quick.calls[0].opts.signal.aborted, false)
    const failing = recordingBackend({ release: async () => { throw new Error('refused') } })
    await sg.decorateAcquireResult(failing.backend, won(), 'k', (e) => seen.push(e), 60000)[Symbol.asyncDispose]()
    assert.ok(Date.now() - started < 5000)
    assert.deepEqual(seen.map((e) => e.message), ['refused'])
    // 0 and non-numbers mean no timeout: the release gets no signal.
    for (const timeout of [0, -1, '50']) {
      const plain = recordingBackend()
      await sg.decorateAcquireResult(plain.backend, won(), 'k', undefined, timeout)[Symbol.asyncDispose]()
      assert.deepEqual(plain.calls[0].opts, { lockId: LOCK_ID })
    }
  })

  test('the default handler logs unless NODE_ENV is production, SYNCGUARD_DEBUG=true logging anyway', async (t) => {
    const saved = { NODE_ENV: process.env.NODE_ENV, SYNCGUARD_DEBUG: process.env.SYNCGUARD_DEBUG }
    const logged = t.mock.method(console, 'error', () => {})
    const failing = recordingBackend({ release: async () => { throw new TypeError('down') } })
    const dispose = () => sg.decorateAcquireResult(failing.backend, won(), 'secret-key')[Symbol.asyncDispose]()
    try {
      delete process.env.NODE_ENV
      delete process.env.SYNCGUARD_DEBUG
      await dispose()
      assert.equal(logged.mock.callCount(), 1)
      assert.deepEqual(logged.mock.calls[0].arguments, [
        '[SyncGuard] Lock disposal failed:',
        { error: 'down', errorName: 'TypeError', source: 'disposal' },
      ])
      process.env.NODE_ENV = 'production'
      await dispose()
      assert.equal(logged.mock.callCount(), 1)
      process.env.SYNCGUARD_DEBUG = '1'
      await dispose()
      assert.equal(logged.mock.callCount(), 1)
      process.env.SYNCGUARD_DEBUG = 'true'
      await dispose()
      assert.equal(logged.mock.callCount(), 2)
      // createDisposableHandle, called directly, has the same default.
      await sg.createDisposableHandle(failing.backend, won(), 'k')[Symbol.asyncDispose]()
      assert.equal(logged.mock.callCount(), 3)
      assert.equal(logged.mock.calls[2].arguments[1].error, 'down')
      assert.equal(sg.defaultOnReleaseError(new Error('x'), { source: 'disposal' }), undefined)
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
    }
  })

  test('acquireHandle returns a lost result as is and refuses an undecorated win', async () => {
    const lost = { ok: false, reason: 'locked' }
    assert.equal(await sg.acquireHandle(recordingBackend({ acquire: async () => lost }).backend, { key: 'k', ttlMs: 1 }), lost)
    const { backend, calls } = recordingBackend()
    await assert.rejects(sg.acquireHandle(backend, { key: 'k', ttlMs: 1 }), (err) => {
      assert.equal(err.constructor, Error)
      assert.equal(
        err.message,
        'Backend.acquire() must return a decorated result. Use decorateAcquireResult() or implement LockBackend correctly.',
      )
      return true
    })
    assert.deepEqual(calls[0].opts, { key: 'k', ttlMs: 1 })
    const decorating = recordingBackend({
      acquire: async () => sg.decorateAcquireResult(decorating.backend, won(), 'k'),
    })
    const handle = await sg.acquireHandle(decorating.backend, { key: 'k', ttlMs: 1 })
    assert.equal(typeof handle[Symbol.asyncDispose], 'function')
  })
})

describe('withTelemetry', () => {
  test('keeps capabilities and reports each call with hashes only', async () => {
    const events = []
    const { backend } = recordingBackend({
      lookup: async (o) => ('key' in o ? { keyHash: 'h' } : null),
    })
    const observed = sg.withTelemetry(backend, { onEvent: (e) => events.push(e) })
    assert.equal(observed.capabilities, backend.capabilities)
    assert.deepEqual(Object.keys(observed), ['acquire', 'release', 'extend', 'isLocked', 'lookup', 'capabilities'])
    await observed.acquire({ key: 'k', ttlMs: 10 })
    await observed.release({ lockId: LOCK_ID })
    await observed.extend({ lockId: LOCK_ID, ttlMs: 10 })
    await observed.isLocked({ key: 'k' })
    assert.deepEqual(await observed.lookup({ key: 'k' }), { keyHash: 'h' })
    assert.equal(await observed.lookup({ lockId: LOCK_ID }), null)
    const k = sg.hashKey('k')
    const id = sg.hashKey(LOCK_ID)
    assert.deepEqual(events, [
      { type: 'acquire', keyHash: k, result: 'ok' },
      { type: 'release', lockIdHash: id, result: 'ok' },
      { type: 'extend', lockIdHash: id, result: 'ok' },
      { type: 'isLocked', keyHash: k, result: 'ok' },
      { type: 'lookup', keyHash: k, result: 'ok' },
      { type: 'lookup', lockIdHash: id, result: 'fail' },
    ])
  })

  test('failures carry the public reason or the hidden one', async () => {
    const events = []
    const { backend } = recordingBackend({
      acquire: async () => ({ ok: false, reason: 'locked' }),
      release: async () => failedWith('expired'),
      extend: async () => failedWith('not-found'),
      isLocked: async () => false,
    })
    const observed = sg.withTelemetry(backend, { onEvent: (e) => events.push(e) })
    const released = await observed.release({ lockId: LOCK_ID })
    // Hidden from JSON and Object.keys; an enumerable symbol key, as syncguard's is.
    assert.equal(JSON.stringify(released), '{"ok":false}')
    assert.deepEqual(released[FAILURE_REASON], { reason: 'expired' })
    await observed.acquire({ key: 'k', ttlMs: 10 })
    await observed.extend({ lockId: LOCK_ID, ttlMs: 10 })
    await observed.isLocked({ key: 'k' })
    // A foreign backend's failure without our symbol: no reason.
    const plain = sg.withTelemetry(recordingBackend({ release: async () => ({ ok: false, reason: 'x' }) }).backend, {
      onEvent: (e) => events.push(e),
    })
    await plain.release({ lockId: LOCK_ID })
    assert.deepEqual(events.map((e) => [e.type, e.result, e.reason]), [
      ['release', 'fail', 'expired'],
      ['acquire', 'fail', 'locked'],
      ['extend', 'fail', 'not-found'],
      ['isLocked', 'fail', undefined],
      ['release', 'fail', undefined],
    ])
    assert.ok(!('reason' in events[4]))
  })

  test('includeRaw: true adds the raw key and lockId', async () => {
    const events = []
    const { backend } = recordingBackend({ lookup: async () => ({}) })
    const observed = sg.withTelemetry(backend, { onEvent: (e) => events.push(e), includeRaw: true })
    await observed.acquire({ key: 'k', ttlMs: 10 })
    await observed.release({ lockId: LOCK_ID })
    await observed.isLocked({ key: 'k' })
    await observed.lookup({ key: 'k' })
    await observed.lookup({ lockId: LOCK_ID })
    assert.deepEqual(events, [
      { type: 'acquire', keyHash: sg.hashKey('k'), result: 'ok', key: 'k', lockId: LOCK_ID },
      { type: 'release', lockIdHash: sg.hashKey(LOCK_ID), result: 'ok', lockId: LOCK_ID },
      { type: 'isLocked', keyHash: sg.hashKey('k'), result: 'ok', key: 'k' },
      { type: 'lookup', keyHash: sg.hashKey('k'), result: 'ok', key: 'k' },
      { type: 'lookup', lockIdHash: sg.hashKey(LOCK_ID), result: 'ok', lockId: LOCK_ID },
    ])
    const lost = []
    const failing = sg.withTelemetry(recordingBackend({ acquire: async () => ({ ok: false, reason: 'locked' }) }).backend, {
      onEvent: (e) => lost.push(e),
      includeRaw: true,
    })
    await failing.acquire({ key: 'k', ttlMs: 10 })
    assert.deepEqual(lost, [{ type: 'acquire', keyHash: sg.hashKey('k'), result: 'fail', reason: 'locked', key: 'k' }])
  })

  test('includeRaw as a predicate sees the event; a throwing one redacts', async () => {
    const events = []
    const asked = []
    const { backend } = recordingBackend()
    const observed = sg.withTelemetry(backend, {
      onEvent: (e) => events.push(e),
      includeRaw: (e) => {
        asked.push({ ...e })
        if (e.type === 'release') throw new Error('predicate')
        return e.type === 'acquire'
      },
    })
    await observed.acquire({ key: 'k', ttlMs: 10 })
    await observed.release({ lockId: LOCK_ID })
    await observed.isLocked({ key: 'k' })
    assert.deepEqual(asked.map((e) => e.type), ['acquire', 'release', 'isLocked'])
    assert.ok(!('key' in asked[0]))
    assert.equal(events[0].key, 'k')
    assert.ok(!('lockId' in events[1]))
    assert.ok(!('key' in events[2]))
  })

  test('a throwing onEvent changes nothing; a failing call emits nothing', async () => {
    const { backend } = recordingBackend()
    const quiet = sg.withTelemetry(backend, { onEvent: () => { throw new Error('sink') } })
    assert.equal((await quiet.acquire({ key: 'k', ttlMs: 10 })).ok, true)
    const events = []
    const failing = recordingBackend({ isLocked: async () => { throw new sg.LockError('NetworkTimeout') } })
    const observed = sg.withTelemetry(failing.backend, { onEvent: (e) => events.push(e) })
    await assert.rejects(observed.isLocked({ key: 'k' }), { code: 'NetworkTimeout' })
    assert.deepEqual(events, [])
  })
})
