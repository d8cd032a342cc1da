'use strict'

// `native-redis-lock/syncguard/redis`: what `syncguard/redis` exports.
require('./lib/syncguard/runtime').refuseBun()
const { createRedisBackend, createLock } = require('./lib/syncguard/index')

module.exports = { createRedisBackend, createLock }
