'use strict'

// Ours with the opt-in lent start: a waiter handed the lock by a release of its own JS thread
// starts as the handover is sent, before Redis confirms it (see the README, lendOnHandover).
const { variant } = require('./ours-distributed-lock')

module.exports = variant('ours: DistributedLock (lendOnHandover)', { lendOnHandover: true })
