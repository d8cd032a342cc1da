'use strict'

// A mixed fleet on one Redis (issue 24): 2 processes locking through our syncguard entry
// (createLock) and 2 through the syncguard stand-in (__test__/helpers/syncguard-standin.js:
// syncguard's keys, JSON value and decisions, over ioredis), all on one key of one private
// redis-server. The shared counter, incremented by a read-sleep-write in every section, ends
// exactly at 4 x SECTIONS; each worker checks in every section that the lock is its own until
// the end, that both kinds see it (isLocked, lookup by key and by lockId), and that its
// finished lockId is released or extended by neither kind. Fences, in counter order (the
// order of the sections), strictly increase across both kinds.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFile } = require('node:child_process')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')

const WORKER = path.join(__dirname, 'fixtures', 'syncguard-fleet-worker.js')
const SECTIONS = 25
const KEY = 'fleet:resource'

let server
let client

before(async () => {
  server = await startRedis()
  client = new Redis({ host: '127.0.0.1', port: server.port })
})
after(async () => {
  client?.disconnect()
  await server?.close()
})

/** Runs one worker to its end: its parsed section lines, or a rejection with its stderr. */
function worker(kind) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [WORKER, kind, String(server.port), KEY, String(SECTIONS)], { timeout: 90_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${kind} worker failed (${err.code ?? err.signal}): ${stderr}`))
      else resolve(stdout.trim().split('\n').map((line) => JSON.parse(line)))
    })
  })
}

test('2 processes of ours and 2 of the syncguard stand-in exclude each other on one key', { timeout: 120_000 }, async () => {
  const results = await Promise.all(['ours', 'standin', 'ours', 'standin'].map(worker))
  const sections = results.flat()
  assert.equal(sections.length, 4 * SECTIONS)
  assert.equal(await client.get('fleet:counter'), String(4 * SECTIONS))

  // Every count was read exactly once: no two sections overlapped.
  const byCount = [...sections].sort((a, b) => a.count - b.count)
  assert.deepEqual(
    byCount.map((s) => s.count),
    Array.from({ length: 4 * SECTIONS }, (_, i) => i),
  )
  // Both kinds really took turns, and their fences interleave in one increasing sequence.
  assert.ok(byCount.some((s) => s.kind === 'ours') && byCount.some((s) => s.kind === 'standin'))
  for (let i = 1; i < byCount.length; i++) {
    assert.ok(byCount[i].fence > byCount[i - 1].fence, `fence ${byCount[i].fence} after ${byCount[i - 1].fence}`)
    assert.match(byCount[i].fence, /^\d{15}$/)
  }
  const handovers = byCount.filter((s, i) => i > 0 && s.kind !== byCount[i - 1].kind).length
  assert.ok(handovers > 0, 'the lock never passed between ours and the stand-in')
  // Every lock and index key released; the fence counter stays (syncguard never deletes it).
  const left = await client.keys('syncguard:*')
  assert.deepEqual(left, ['syncguard:fence:syncguard:fleet:resource'])
  assert.equal(await client.get(left[0]), String(4 * SECTIONS))
})
