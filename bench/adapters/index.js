'use strict'

// Every adapter exposes { name, kind, package, create({ port, url }) } and create() resolves
//   { acquire(key, ttlMs) -> handle | null, release(handle), waitAcquire(key, ttlMs, worker)
//     -> handle, close(), and, where `holds` is set, hold(key, ttlMs, refreshMs), lost
//     and (if release does not end a hold) releaseHeld(held) for scenario (e) }.
const ADAPTERS = {
  'ours-distributed-lock': require('./ours-distributed-lock'),
  'ours-distributed-lock-lend': require('./ours-distributed-lock-lend'),
  'ours-exclusive-lock': require('./ours-exclusive-lock'),
  'ours-lock-service': require('./ours-lock-service'),
  redlock4: require('./redlock4'),
  'sesamecare-redlock': require('./sesamecare-redlock'),
  'redis-semaphore': require('./redis-semaphore'),
  'redlock-universal': require('./redlock-universal'),
  'ioredis-raw': require('./ioredis-raw'),
}

module.exports = ADAPTERS
