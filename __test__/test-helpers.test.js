'use strict'

// The test helpers that start servers: a server that cannot start fails at once, and leaves
// nothing running behind it (a test process that keeps a child alive never exits).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { RedisServer } = require('./helpers/redis-server')
const { RedisCluster } = require('./helpers/redis-cluster')

test('a redis-server whose port is taken fails at once, and is not left running', async () => {
  const taken = net.createServer()
  await new Promise((resolve) => taken.listen(0, '127.0.0.1', resolve))
  const server = new RedisServer()
  server.port = taken.address().port
  const started = performance.now()
  try {
    await assert.rejects(server.start(), /exited .* before it was ready/)
  } finally {
    taken.close()
  }
  assert.ok(performance.now() - started < 5_000, `failed after ${(performance.now() - started).toFixed(0)} ms`)
  assert.notEqual(server.child.exitCode ?? server.child.signalCode, null, 'the server still runs')
})

test('a cluster that cannot be created stops the nodes it started', async () => {
  // redis-cli creates no cluster of fewer than 3 masters: both nodes start, the creation fails.
  const cluster = new RedisCluster({ masters: 2, replicas: 0 })
  await assert.rejects(cluster.start(), /cluster create failed/)
  assert.equal(cluster.nodes.length, 2)
  for (const node of cluster.nodes) {
    assert.notEqual(node.child.exitCode ?? node.child.signalCode, null, `node ${node.port} still runs`)
  }
})
