'use strict'

// Ours, through native-redis-lock/syncguard: createRedisBackend(redis) with an ioredis client,
// backend.acquire + backend.release (see bench/lib/syncguard.js).
const { backendRow } = require('../lib/syncguard')
const { openOurs } = require('./ours-syncguard-lock')

module.exports = backendRow({ name: 'ours: syncguard backend', kind: 'ours', open: openOurs })
