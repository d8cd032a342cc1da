'use strict'

// ours-exclusive-lock on the embedded memory:// backend, beside the redis-server rows of the same run.
const { onMemory } = require('./memory')

module.exports = onMemory(require('./ours-exclusive-lock'))
