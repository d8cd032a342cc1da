'use strict'

// Which objects are taken as Redis clients: only real ioredis and node-redis clients, whose
// own settings say where their server is. Objects that merely look like one are refused
// before any connection, so nothing ever dials a server the user did not name.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { DistributedLock, ExclusiveLock } = require('..')
const DistributedLockService = require('../maestro')
const { connectionOptions } = require('../lib/connection')

const noop = () => {}
const fakes = {
  'ioredis-shaped, no address': () => ({ options: {}, status: 'ready', sendCommand: noop }),
  'node-redis-shaped, no address': () => ({ options: {}, isOpen: false, sendCommand: noop }),
  'node-redis-shaped, no options': () => ({ options: undefined, isOpen: false, sendCommand: noop }),
  'ioredis-shaped with an address but not a client': () => ({ options: { host: 'h', port: 1 }, status: 'ready', sendCommand: noop }),
}

for (const [label, make] of Object.entries(fakes)) {
  test(`DistributedLock refuses a ${label} object, naming redis`, () => {
    assert.throws(() => new DistributedLock(make()), (err) => {
      assert.equal(err.code, 'EINVAL')
      assert.equal(err.argument, 'redis')
      assert.match(err.message, /^redis /)
      return err instanceof TypeError
    })
  })

  test(`DistributedLockService refuses a ${label} object, naming cacheInstance`, () => {
    assert.throws(() => new DistributedLockService('k', 1000, make()), (err) => {
      assert.equal(err.code, 'EINVAL')
      assert.equal(err.argument, 'cacheInstance')
      return true
    })
  })

  test(`ExclusiveLock refuses a ${label} object as cache_connection`, () => {
    assert.throws(() => new ExclusiveLock({ name: 'k', cache_connection: make() }), (err) => {
      assert.equal(err.code, 'EINVAL')
      assert.match(err.message, /cache_connection/)
      return true
    })
  })
}

test('an ioredis client whose options name no address is refused', () => {
  const client = new Redis({ lazyConnect: true })
  try {
    delete client.options.host
    delete client.options.port
    assert.throws(() => new DistributedLock(client), { code: 'EINVAL', argument: 'redis', message: /name no host, port or path/ })
  } finally {
    client.disconnect()
  }
})

test("a real node-redis client with no address is read as node-redis's own default, localhost:6379", () => {
  const { connection } = connectionOptions(createClient())
  assert.equal(connection.host, 'localhost')
  assert.equal(connection.port, 6379)
  assert.equal(connection.url, undefined)
})

test("a node-redis client's own host or port is completed with node-redis's default for the other", () => {
  assert.deepEqual(
    [connectionOptions(createClient({ socket: { port: 7000 } })).connection.host, connectionOptions(createClient({ socket: { host: 'db' } })).connection.port],
    ['localhost', 6379],
  )
  const fromUrl = connectionOptions(createClient({ url: 'redis://db:7001' })).connection
  // node-redis itself copies the URL's host and port into its socket options.
  assert.deepEqual([fromUrl.url, fromUrl.host, fromUrl.port], ['redis://db:7001', 'db', 7001])
  const fromPath = connectionOptions(createClient({ socket: { path: '/tmp/r.sock' } })).connection
  assert.deepEqual([fromPath.path, fromPath.host, fromPath.port], ['/tmp/r.sock', undefined, undefined])
})

test("a real ioredis client with ioredis's defaults is read as they are (localhost:6379)", () => {
  const client = new Redis({ lazyConnect: true })
  try {
    const { connection } = connectionOptions(client)
    assert.deepEqual([connection.host, connection.port], ['localhost', 6379])
  } finally {
    client.disconnect()
  }
})
