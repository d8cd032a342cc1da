'use strict'

// Error messages a user can act on: they name the argument as the caller's API names it,
// repeat what was refused (secrets hidden) and list every accepted form.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { DistributedLock, ExclusiveLock } = require('..')
const DistributedLockService = require('../maestro')

/** Each API with the name it gives its connection argument. */
const apis = [
  ['DistributedLock', 'redis', (c) => new DistributedLock(c)],
  ['ExclusiveLock', 'cache_connection', (c) => new ExclusiveLock({ name: 'n', cache_connection: c })],
  ['DistributedLockService', 'cacheInstance', (c) => new DistributedLockService('k', 1000, c)],
]

for (const [api, name, make] of apis) {
  test(`${api}: a bad URL names ${name}, shows the URL without its password, and lists memory://`, () => {
    assert.throws(() => make('htp://alice:hunter2@db.example:6379/0'), (err) => {
      assert.equal(err.code, 'EINVAL')
      assert.equal(err.argument, name)
      assert.ok(err.message.startsWith(`${name} must be`), err.message)
      assert.match(err.message, /memory:\/\//)
      assert.match(err.message, /got "htp:\/\/alice:\*\*\*@db\.example:6379\/0"/)
      assert.ok(!err.message.includes('hunter2'), err.message)
      assert.ok(err.stack.startsWith(`TypeError: ${err.message}\n`), err.stack)
      return err instanceof TypeError
    })
  })

  test(`${api}: a bad memory:// name names ${name} and shows it`, () => {
    assert.throws(() => make('memory://a/b'), (err) => {
      assert.equal(err.argument, name)
      assert.ok(err.message.startsWith(`${name} must be memory://`), err.message)
      // The name alone is shown, once (the native message already repeats it).
      assert.match(err.message, /got 'a\/b'$/)
      return true
    })
  })

  test(`${api}: a bad url field is named ${name}.url`, () => {
    assert.throws(() => make({ url: 'htp://x:1' }), (err) => {
      assert.equal(err.argument, `${name}.url`)
      assert.ok(err.message.startsWith(`${name}.url must be`), err.message)
      assert.match(err.message, /got "htp:\/\/x:1"/)
      return true
    })
  })
}

test('a string with no scheme is not quoted (it may be a password) but said to be no URL', () => {
  assert.throws(() => new DistributedLock('hunter2'), (err) => {
    assert.match(err.message, /no scheme:\/\//)
    assert.ok(!err.message.includes('hunter2'))
    return true
  })
})

test("a password in a URL's parameters is hidden too", () => {
  assert.throws(() => new DistributedLock('unix:///no/such.sock?db=x&password=hunter2'), (err) => {
    assert.ok(!err.message.includes('hunter2'), err.message)
    return true
  })
})

test('DistributedLockService: a cacheInstance of the wrong type says what it got and lists memory://', () => {
  assert.throws(() => new DistributedLockService('k', 1000, 42), (err) => {
    assert.equal(err.argument, 'cacheInstance')
    assert.match(err.message, /memory:\/\//)
    assert.match(err.message, /got number 42/)
    return true
  })
})

test("ExclusiveLock keeps the original's message for a cache_connection it cannot use, with the reason as its cause", () => {
  assert.throws(() => new ExclusiveLock({ name: 'n', cache_connection: {} }), (err) => {
    assert.equal(err.message, 'A valid cache_connection to a cache store is required')
    assert.equal(err.argument, 'cache_connection')
    assert.equal(err.cause?.argument, 'cache_connection')
    assert.match(err.cause.message, /names none of them/)
    return true
  })
})
