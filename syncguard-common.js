'use strict'

// `native-redis-lock/syncguard/common`: what `syncguard/common` exports, for custom backends.
require('./lib/syncguard/runtime').refuseBun()
module.exports = require('./lib/syncguard/common')
