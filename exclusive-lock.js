'use strict'

// Same module shape as @logdna/exclusive-lock: the module is the class.
module.exports = require('./lib/exclusive-lock').ExclusiveLock
