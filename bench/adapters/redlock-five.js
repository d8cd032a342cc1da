'use strict'

// Scenarios (ra), (rb) and (rc): a Redlock over the 5 servers run.js starts, through ours and the
// two Redlock peers, each as its users would write it over 5 independent masters: one client per
// server, a lock held when a majority granted it. Only these adapters take part in them.
const Redlock4 = require('redlock')
const { Redlock: SesameRedlock } = require('@sesamecare-oss/redlock')
const { connect } = require('../lib/redis')
const { requireOurs } = require('../lib/util')

const SCENARIOS = ['ra', 'rb', 'rc']
// (rc) waits as the single-server contended scenario does: retry every 10 ms, jitter 5.
const WAIT = { retryCount: -1, retryDelay: 10, retryJitter: 5 }

const ours = {
  name: 'ours: DistributedLock([5 servers])',
  kind: 'ours',
  package: 'native-redis-lock',
  scenarios: SCENARIOS,
  async create({ urls }) {
    const { DistributedLock } = requireOurs('')
    const lock = new DistributedLock(urls, { keyPrefix: 'lock:', retryDelayMs: 10 })
    return {
      async acquire(key, ttlMs) {
        try {
          return await lock.acquire(key, ttlMs)
        } catch (err) {
          if (err.code === 'ELOCKED') return null
          throw err
        }
      },
      release: (handle) => handle.release(),
      waitAcquire: (key, ttlMs) => lock.waitForLock(key, 10_000, ttlMs),
      close: async () => {},
    }
  },
}

const redlock4 = {
  name: 'redlock@4 (5 servers)',
  kind: 'peer',
  package: 'redlock',
  scenarios: SCENARIOS,
  async create({ ports }) {
    const clients = await Promise.all(ports.map((port) => connect(port)))
    const once = new Redlock4(clients, { retryCount: 0, retryJitter: 0 })
    const waiting = new Redlock4(clients, WAIT)
    once.on('clientError', () => {})
    waiting.on('clientError', () => {})
    return {
      async acquire(key, ttlMs) {
        try {
          return await once.lock(key, ttlMs)
        } catch {
          return null
        }
      },
      release: (lock) => once.unlock(lock),
      waitAcquire: (key, ttlMs) => waiting.lock(key, ttlMs),
      close: () => Promise.all(clients.map((client) => client.quit())),
    }
  },
}

const sesamecare = {
  name: '@sesamecare-oss/redlock (5 servers)',
  kind: 'peer',
  package: '@sesamecare-oss/redlock',
  scenarios: SCENARIOS,
  async create({ ports }) {
    const clients = await Promise.all(ports.map((port) => connect(port)))
    const redlock = new SesameRedlock(clients, { retryCount: 0, retryJitter: 0 })
    redlock.on('error', () => {}) // it emits ResourceLockedError on every lost vote
    return {
      async acquire(key, ttlMs) {
        try {
          return await redlock.acquire([key], ttlMs)
        } catch {
          return null
        }
      },
      release: (lock) => redlock.release(lock),
      waitAcquire: (key, ttlMs) => redlock.acquire([key], ttlMs, WAIT),
      close: () => Promise.all(clients.map((client) => client.quit())),
    }
  },
}

module.exports = { ours, redlock4, sesamecare }
