'use strict'

// Ours, through native-redis-lock/syncguard: createLock(redis) with an ioredis client, as a
// syncguard user writes it (see bench/lib/syncguard.js for how the rows are measured).
const { connect } = require('../lib/redis')
const { requireOurs } = require('../lib/util')
const { lockRow } = require('../lib/syncguard')

async function openOurs({ port }) {
  const { createRedisBackend, lock } = requireOurs('syncguard')
  const client = await connect(port)
  const backend = createRedisBackend(client)
  return { backend, lock: (fn, config) => lock(backend, fn, config), close: async () => client.disconnect() }
}

module.exports = lockRow({ name: 'ours: syncguard lock()', kind: 'ours', open: openOurs })
module.exports.openOurs = openOurs
