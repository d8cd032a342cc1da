'use strict'

// The engine's process-level promises: one named runtime, one connection per distinct
// setting, scripts that survive SCRIPT FLUSH.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { DistributedLock } = require('..')

let server
let admin

before(async () => {
  server = await startRedis()
  admin = new Redis(server.port, '127.0.0.1', { lazyConnect: true })
  await admin.connect()
  await admin.client('SETNAME', 'test-admin')
})

after(async () => {
  admin.disconnect()
  await server.close()
})

test('the addon runs on one small runtime whose threads are named for the package', () => {
  const names = fs.readdirSync('/proc/self/task').map((tid) =>
    fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim(),
  )
  // Linux keeps 15 characters of a thread name.
  const ours = names.filter((name) => name === 'native-redis-lo')
  assert.equal(ours.length, 1, `threads: ${names.join(', ')}`)
  assert.equal(names.filter((name) => name.startsWith('tokio-')).length, 0)
})

// Per endpoint: one tokio connection (RESP3) and one driven by the JS thread (RESP2), which
// opens in the background after the first call.
async function connectionsByKind() {
  let found
  for (let tries = 0; tries < 50; tries++) {
    const lines = (await admin.client('LIST')).split('\n').filter((l) => l.includes('addr=') && !l.includes('name=test-admin'))
    found = { tokio: lines.filter((l) => / resp=3/.test(l)).length, direct: lines.filter((l) => / resp=2/.test(l)).length }
    if (found.direct >= found.tokio) break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return found
}

test('locks with equal settings share their connections; other settings get their own', async () => {
  const url = `redis://127.0.0.1:${server.port}`
  const locks = [
    new DistributedLock(url),
    new DistributedLock(url, { keyPrefix: 'other:' }),
    new DistributedLock({ host: '127.0.0.1', port: server.port }),
  ]
  for (let round = 0; round < 3; round++) {
    await Promise.all(locks.map((lock, i) => lock.isLocked(`shared-${i}`)))
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  assert.deepEqual(await connectionsByKind(), { tokio: 1, direct: 1 })

  const elsewhere = new DistributedLock(`${url}/3`)
  await elsewhere.isLocked('db3')
  await new Promise((resolve) => setTimeout(resolve, 20))
  await elsewhere.isLocked('db3')
  assert.deepEqual(await connectionsByKind(), { tokio: 2, direct: 2 })
})

test('scripts are reloaded after SCRIPT FLUSH (NOSCRIPT is handled)', async () => {
  const lock = new DistributedLock(server.url)
  const first = await lock.acquire('flushed', 1000)
  await admin.script('FLUSH')
  await first.release()
  const second = await lock.acquire('flushed', 1000)
  await admin.script('FLUSH')
  await second.extend(1000)
  assert.ok(second.isHeld)
  await second.release()
  assert.equal(await admin.exists('lock:flushed'), 0)
})
