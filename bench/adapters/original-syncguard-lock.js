'use strict'

// The syncguard stand-in's lock(backend, fn, config) (see bench/lib/syncguard.js and the
// stand-in's header, __test__/helpers/syncguard-standin.js, for what it follows), over one
// ioredis client, as a syncguard user's createRedisBackend(redis) is.
const { connect } = require('../lib/redis')
const { lockRow } = require('../lib/syncguard')
const { createStandinBackend, standinLock } = require('../../__test__/helpers/syncguard-standin')

async function openStandin({ port }) {
  const client = await connect(port)
  const backend = createStandinBackend(client)
  return { backend, lock: (fn, config) => standinLock(backend, fn, config), close: async () => client.disconnect() }
}

module.exports = lockRow({ name: 'original: syncguard lock() (stand-in)', kind: 'original', open: openStandin })
module.exports.openStandin = openStandin
