'use strict'

// Ours, DistributedLock.waitForLock on a free key: the waiting acquire measured where nobody
// holds the lock, beside DistributedLock.acquire in (a) and (b), so the report can tell what
// waiting costs when there is nothing to wait for. Same options as ours-distributed-lock.js
// (keyPrefix 'lock:', retryDelayMs 10). Runs in (a) and (b) only: contended, it is the
// DistributedLock row of (c) already.
const { requireOurs } = require('../lib/util')

module.exports = {
  name: 'ours: DistributedLock.waitForLock',
  kind: 'ours',
  package: 'native-redis-lock',
  scenarios: ['a', 'b'],
  async create({ url }) {
    const { DistributedLock } = requireOurs('')
    const lock = new DistributedLock(url, { keyPrefix: 'lock:', retryDelayMs: 10 })
    return {
      acquire: (key, ttlMs) => lock.waitForLock(key, 10_000, ttlMs),
      release: (handle) => handle.release(),
      waitAcquire: (key, ttlMs) => lock.waitForLock(key, 10_000, ttlMs),
      close: async () => {},
    }
  },
}
