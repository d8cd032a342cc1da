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

async function lockConnections() {
  const list = await admin.client('LIST')
  return list.split('\n').filter((line) => line.includes('addr=') && !line.includes('name=test-admin')).length
}

test('the addon runs on one small runtime whose threads are named for the package', () => {
  const names = fs.readdirSync('/proc/self/task').map((tid) =>
    fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim(),
  )
  // Linux keeps 15 characters of a thread name.
  const ours = names.filter((name) => name === 'native-redis-lo')
  assert.equal(ours.length, 1, `threads: ${names.join(', ')}`)
  assert.equal(names.filter((name) => name.startsWith('tokio-')).length, 0)
})

test('locks with equal settings share one connection; other settings get their own', async () => {
  const url = `redis://127.0.0.1:${server.port}`
  const locks = [
    new DistributedLock(url),
    new DistributedLock(url, { keyPrefix: 'other:' }),
    new DistributedLock({ host: '127.0.0.1', port: server.port }),
  ]
  await Promise.all(locks.map((lock, i) => lock.isLocked(`shared-${i}`)))
  assert.equal(await lockConnections(), 1)

  const elsewhere = new DistributedLock(`${url}/3`)
  await elsewhere.isLocked('db3')
  assert.equal(await lockConnections(), 2)
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
