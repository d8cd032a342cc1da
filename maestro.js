'use strict'

// Same module shape as maestro's distributed-lock-service.js: the module is the class.
module.exports = require('./lib/lock-service').DistributedLockService
