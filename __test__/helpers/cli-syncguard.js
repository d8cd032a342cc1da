'use strict'

// What the command line must do with a syncguard lock whose index and fence keys a test found
// on the server by itself, for __test__/cli*.test.js.
const assert = require('node:assert/strict')
const { cli } = require('./cli')

/**
 * `inspect` of syncguard's lock `won` (of `backend`, user key `key`, at `lockKey`) names its
 * `index` and `fence` keys and reads the counter; `release --force` deletes the lock and the
 * index and moves the counter on by one (as `command(name, ...args)` reads them on the
 * server that holds them): the lockId is dead, the next fence above it.
 */
async function inspectAndForce(url, command, { backend, won, key, lockKey, index, fence }) {
  const { code, stdout, stderr } = await cli(['inspect', lockKey, '--json', '--url', url])
  assert.equal(code, 0, stderr)
  const lock = JSON.parse(stdout)
  assert.equal(lock.api, 'syncguard')
  assert.equal(lock.holder, `${won.lockId.slice(0, 8)}…`)
  assert.deepEqual(lock.keys, { fence, index })
  assert.equal(lock.fenceCounter, String(Number(won.fence)))

  const forced = await cli(['release', lockKey, '--force', '--yes', '--json', '--url', url])
  assert.equal(forced.code, 0, forced.stderr)
  const result = JSON.parse(forced.stdout)
  assert.equal(result.deletedKeys, 2, 'the lock and its index')
  assert.equal(result.fenceCounter, String(Number(won.fence) + 1))
  assert.equal(Number(await command('EXISTS', lockKey, index)), 0)
  assert.equal(String(await command('GET', fence)), String(Number(won.fence) + 1))
  assert.equal((await backend.extend({ lockId: won.lockId, ttlMs: 1000 })).ok, false)
  const next = await backend.acquire({ key, ttlMs: 1000 })
  assert.ok(next.fence > won.fence)
  await next.release()
}

module.exports = { inspectAndForce }
