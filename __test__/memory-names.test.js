'use strict'

// A memory:// name is ASCII letters, digits, '-', '_' and '.', as its error message says:
// anything else is refused with EINVAL before a keyspace is made, and the message repeats
// the name with whatever is not plain ASCII escaped.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { DistributedLock, ExclusiveLock } = require('..')
const DistributedLockService = require('../maestro')

// The examples, each of which was taken as a keyspace of its own, and how the
// message shows it.
const BAD = [
  ['a b', 'a b'],
  ['ü', '\\u{fc}'],
  ['%2F', '%2F'],
  ['\0', '\\u{0}'],
  ['tab\there', 'tab\\there'],
  ['a/b', 'a/b'],
]

const refused = (argument, shown) => (err) => {
  assert.equal(err.code, 'EINVAL')
  assert.ok(err instanceof TypeError)
  assert.equal(err.argument, argument)
  assert.match(err.message, /ASCII letters, digits/)
  assert.ok(err.message.includes(`'${shown}'`), err.message)
  // Nothing unprintable reaches a log line.
  assert.doesNotMatch(err.message, /[^\x20-\x7e]/)
  return true
}

test('DistributedLock.memory(name) refuses a name that is not letters, digits, - _ or .', () => {
  for (const [name, shown] of BAD) {
    assert.throws(() => DistributedLock.memory(name), refused('name', shown), JSON.stringify(name))
  }
  assert.throws(() => DistributedLock.memory(42), { code: 'EINVAL', argument: 'name' })
})

test('a memory:// URL with such a name is refused by every API', () => {
  for (const [name, shown] of BAD) {
    const url = `memory://${name}`
    assert.throws(() => new DistributedLock(url), refused('redis', shown), JSON.stringify(name))
    assert.throws(
      () => new ExclusiveLock({ name: 'job', cache_connection: url }),
      (err) => err.code === 'EINVAL' && err.message.includes(`'${shown}'`),
      JSON.stringify(name),
    )
    assert.throws(
      () => new DistributedLockService('job', 1000, url),
      (err) => err.code === 'EINVAL' && err.message.includes(`'${shown}'`),
      JSON.stringify(name),
    )
  }
})

test('a name that may hold credentials is not repeated', () => {
  assert.throws(() => new DistributedLock('memory://user:s3cret@host'), (err) => {
    assert.equal(err.code, 'EINVAL')
    assert.ok(!err.message.includes('s3cret'), err.message)
    return true
  })
})

test('names made of the allowed characters still work, each its own keyspace', async () => {
  const names = ['', 'jobs', 'A-z_0.9', `names-${process.pid}`]
  for (const name of names) {
    const handle = await DistributedLock.memory(name).acquire('memory-names', 1000)
    assert.equal(await new DistributedLock(`memory://${name}`).isLocked('memory-names'), true)
    await handle.release()
  }
})
