// Run by scripts/syncguard-conformance.js with `--target syncguard`: our stand-in
// (__test__/helpers/syncguard-standin.js, SG_CONF_STANDIN) beside syncguard itself (transpiled
// into ../redis and ../common) on the harness's redis-server: each excludes the other, sees the
// other's lock through isLocked and lookup (the same sanitised LockInfo), releases and extends
// it by lockId, continues its fence sequence, and a mixed crowd of lock() calls is exclusive.
// This checks the oracle that the mixed-fleet test and the bench compare ours with.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { after, before, test } from 'node:test'
import { lock } from '../common/auto-lock.js'
import { createRedisBackend } from '../redis/index.js'

const require = createRequire(import.meta.url)
const Redis = require(process.env.SG_CONF_IOREDIS)
const standin = require(process.env.SG_CONF_STANDIN)
const plain = (info) => JSON.parse(JSON.stringify(info)) // without the raw-data symbol
let a
let b

before(() => {
  a = new Redis(Number(process.env.SG_CONF_PORT), '127.0.0.1')
  b = new Redis(Number(process.env.SG_CONF_PORT), '127.0.0.1')
})
after(() => {
  a.disconnect()
  b.disconnect()
})

// The default prefix, syncguard's test prefix, and one long enough to hash every key.
for (const keyPrefix of [undefined, 'syncguard:test:', 'p'.repeat(700)]) {
  for (const key of ['plain', 'e\u0301 (NFD)', 'x'.repeat(500)]) {
    test(`prefix ${keyPrefix?.slice(0, 20)}, key ${key.slice(0, 12)}: the same lock seen from both`, async () => {
      const options = keyPrefix === undefined ? {} : { keyPrefix }
      const sg = createRedisBackend(a, options)
      const si = standin.createStandinBackend(b, options)
      const first = await sg.acquire({ key, ttlMs: 5000 })
      assert.equal(first.ok, true)
      assert.equal((await si.acquire({ key, ttlMs: 5000 })).ok, false)
      assert.equal(await si.isLocked({ key }), true)
      assert.deepEqual(plain(await si.lookup({ key })), plain(await sg.lookup({ key })))
      assert.deepEqual(plain(await si.lookup({ lockId: first.lockId })), plain(await sg.lookup({ key })))
      assert.equal((await si.release({ lockId: 'A'.repeat(22) })).ok, false)
      assert.equal((await si.extend({ lockId: first.lockId, ttlMs: 8000 })).ok, true)
      assert.equal((await si.release({ lockId: first.lockId })).ok, true)
      const second = await si.acquire({ key, ttlMs: 5000 })
      assert.equal(second.ok, true)
      assert.ok(second.fence > first.fence, `${second.fence} > ${first.fence}`)
      assert.equal((await sg.acquire({ key, ttlMs: 5000 })).ok, false)
      assert.deepEqual(plain(await sg.lookup({ lockId: second.lockId })), plain(await si.lookup({ key })))
      assert.equal((await sg.extend({ lockId: second.lockId, ttlMs: 9000 })).ok, true)
      assert.equal((await sg.release({ lockId: second.lockId })).ok, true)
      assert.equal(await sg.isLocked({ key }), false)
    })
  }
}

test('lock() of syncguard and of the stand-in exclude each other', async () => {
  const sg = createRedisBackend(a)
  const si = standin.createStandinBackend(b)
  let inside = 0
  let most = 0
  let done = 0
  const section = async () => {
    most = Math.max(most, ++inside)
    await new Promise((resolve) => setTimeout(resolve, 5))
    done++
    inside--
  }
  const acquisition = { backoff: 'fixed', retryDelayMs: 5, maxRetries: 1e6, timeoutMs: 20_000 }
  await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      i % 2 ? lock(sg, section, { key: 'crowd', acquisition }) : standin.standinLock(si, section, { key: 'crowd', acquisition }),
    ),
  )
  assert.equal(most, 1)
  assert.equal(done, 20)
})
