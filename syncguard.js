'use strict'

// `native-redis-lock/syncguard`: what `syncguard` exports, plus createRedisBackend and createLock.
require('./lib/syncguard/runtime').refuseBun()
module.exports = require('./lib/syncguard/index')
