'use strict'

// The four syncguard rows share their shape: ours (native-redis-lock/syncguard) and the
// syncguard stand-in (__test__/helpers/syncguard-standin.js: syncguard 2.5.2's keys, JSON
// value and Lua decisions through ioredis, its lock() loop), each measured two ways:
//   backend rows: backend.acquire({ key, ttlMs }) + backend.release({ lockId }); a contended
//     worker (c) polls backend.acquire every 10 ms, as a user of the bare backend would;
//   lock rows: lock(fn, { key, ttlMs }) with the section inside fn (held until the bench
//     releases it); contended (c) with the same acquisition options on both sides, syncguard's
//     exponential backoff and "equal" jitter from 10 ms (no wake-up in the stand-in; ours is
//     also woken by a release).
// `open({ port })` resolves { backend, lock(fn, config), close() } for one side.
const { holdThroughUsing, sleep } = require('./util')

const WAIT_OPTIONS = { retryDelayMs: 10, timeoutMs: 60_000, maxRetries: 1e9 }
const WAIT_LIMIT_MS = 10_000

/** An adapter (bench/adapters/index.js) whose create() opens one side and builds on it. */
function row({ name, kind, open }, build) {
  return {
    name,
    kind,
    package: kind === 'ours' ? 'native-redis-lock' : 'ioredis',
    scenarios: ['a', 'b', 'c'],
    async create(where) {
      const side = await open(where)
      return { ...build(side), close: () => side.close() }
    },
  }
}

const backendRow = (about) =>
  row(about, ({ backend }) => {
    const acquire = async (key, ttlMs) => {
      const result = await backend.acquire({ key, ttlMs })
      return result.ok ? result : null
    }
    return {
      acquire,
      release: (held) => backend.release({ lockId: held.lockId }),
      async waitAcquire(key, ttlMs) {
        const deadline = Date.now() + WAIT_LIMIT_MS
        for (;;) {
          const held = await acquire(key, ttlMs)
          if (held) return held
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${key}`)
          await sleep(10)
        }
      },
    }
  })

const ignore = () => {}
const lockRow = (about) =>
  row(about, ({ lock }) => ({
    acquire: (key, ttlMs) => holdThroughUsing((section) => lock(section, { key, ttlMs }), ignore),
    release: (held) => held.release(),
    async waitAcquire(key, ttlMs) {
      const held = await holdThroughUsing((section) => lock(section, { key, ttlMs, acquisition: WAIT_OPTIONS }), ignore)
      if (!held) throw new Error(`lock() gave up waiting for ${key}`)
      return held
    },
  }))

module.exports = { backendRow, lockRow }
