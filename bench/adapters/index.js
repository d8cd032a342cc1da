'use strict'

// Every adapter exposes { name, kind, package, create({ port, url }) } and create() resolves
//   { acquire(key, ttlMs) -> handle | null, release(handle), waitAcquire(key, ttlMs, worker)
//     -> handle, close(), and, where `holds` is set, hold(key, ttlMs, refreshMs), lost
//     and (if release does not end a hold) releaseHeld(held) for scenario (e) }.
// kind: 'ours' (this package), 'peer' (a JS lock package: the "best peer" is chosen among these
// only), 'original' (a stand-in for a package we replace, sending its exact commands; compared
// with ours in its own table, never a peer), 'baseline' (raw ioredis, or for the Redlock five bare
// sockets: not a lock package).
// An optional `scenarios` list limits the scenarios an adapter takes part in (default: all).
// Each adapter is loaded when first read: a script that uses only ours and ioredis-raw (the
// test run's bench-smoke) must load without the peers, which live in bench/node_modules.
const LOADERS = {
  'ours-distributed-lock': () => require('./ours-distributed-lock'),
  'ours-distributed-lock-lend': () => require('./ours-distributed-lock-lend'),
  'ours-distributed-lock-wait': () => require('./ours-distributed-lock-wait'),
  // With an onEvent hook and stats() read every 100 acquisitions: what tracing costs.
  'ours-distributed-lock-traced': () => require('./ours-distributed-lock-traced'),
  // With `stats: false`: what the always-on counters cost, against the plain row.
  'ours-distributed-lock-nostats': () => require('./ours-distributed-lock-nostats'),
  // With `crossProcessGrants: true`, (c4) and (c16) only: grants across processes against wakes.
  'ours-distributed-lock-grants': () => require('./ours-distributed-lock-grants'),
  'ours-exclusive-lock': () => require('./ours-exclusive-lock'),
  'ours-lock-service': () => require('./ours-lock-service'),
  // The same three on the embedded memory:// backend (no server): what running in process buys.
  'ours-distributed-lock-memory': () => require('./ours-distributed-lock-memory'),
  'ours-exclusive-lock-memory': () => require('./ours-exclusive-lock-memory'),
  'ours-lock-service-memory': () => require('./ours-lock-service-memory'),
  'original-exclusive-lock': () => require('./original-exclusive-lock'),
  'original-maestro': () => require('./original-maestro'),
  // native-redis-lock/syncguard against the syncguard stand-in: the backend, and lock(fn).
  'ours-syncguard': () => require('./ours-syncguard'),
  'ours-syncguard-lock': () => require('./ours-syncguard-lock'),
  'original-syncguard': () => require('./original-syncguard'),
  'original-syncguard-lock': () => require('./original-syncguard-lock'),
  // One object per acquisition, (a) and (b) only: what constructing each costs.
  'ours-distributed-lock-each': () => require('./ours-distributed-lock-each'),
  'ours-exclusive-lock-each': () => require('./ours-exclusive-lock-each'),
  'ours-lock-service-each': () => require('./ours-lock-service-each'),
  'original-exclusive-lock-each': () => require('./original-exclusive-lock-each'),
  'original-maestro-each': () => require('./original-maestro-each'),
  // Peers made per acquisition: the reference for ours-distributed-lock-each (never a best peer).
  'redis-semaphore-each': () => require('./redis-semaphore-each'),
  'sesamecare-redlock-each': () => require('./sesamecare-redlock-each'),
  redlock4: () => require('./redlock4'),
  'sesamecare-redlock': () => require('./sesamecare-redlock'),
  'redis-semaphore': () => require('./redis-semaphore'),
  'redlock-universal': () => require('./redlock-universal'),
  'ioredis-raw': () => require('./ioredis-raw'),
  // (ra) and (rb) only: a Redlock over 5 servers, ours against the two Redlock peers.
  'ours-redlock': () => require('./redlock-five').ours,
  'redlock4-five': () => require('./redlock-five').redlock4,
  'sesamecare-redlock-five': () => require('./redlock-five').sesamecare,
  // (ra) and (rb) only: five bare sockets, the floor any JavaScript Redlock client stands on.
  'raw-five': () => require('./redlock-floor'),
}

const ADAPTERS = {}
for (const [id, load] of Object.entries(LOADERS)) {
  let adapter
  Object.defineProperty(ADAPTERS, id, { enumerable: true, get: () => (adapter ??= load()) })
}

module.exports = ADAPTERS
