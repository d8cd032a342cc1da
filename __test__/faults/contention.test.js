'use strict'

// Fault suite, scenario 1: contention. 4 OS processes spend 10 s each doing non-atomic
// GET / 0-2 ms pause / SET increments of one counter under the lock (waitForLock). No update
// may be lost: the final counter equals the sum of the children's own counts.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('../helpers/redis-server')
const { Child } = require('../fixtures/fault-children')
const { record } = require('./figures')

const PROCESSES = 4
const DURATION_MS = 10_000

let server
let client

before(async () => {
  server = await startRedis()
  client = new Redis(server.url)
})

after(async () => {
  Child.killAll()
  client?.disconnect()
  await server?.close()
})

/** Starts PROCESSES children, releases them together, and collects their reports. */
async function run(name, mode, durationMs) {
  const keys = { LOCK_KEY: `contend:${name}:lock`, COUNTER_KEY: `contend:${name}:counter`, GO_KEY: `contend:${name}:go` }
  const env = { REDIS_URL: server.url, MODE: mode, DURATION_MS: String(durationMs), RETRY_DELAY_MS: '5', ...keys }
  const kids = Array.from({ length: PROCESSES }, () => new Child('fault-contend.js', [], env))
  await Promise.all(kids.map((kid) => kid.waitFor('ready')))
  await client.rpush(keys.GO_KEY, ...kids.map((_, i) => `go-${i}`))
  const exits = await Promise.all(kids.map((kid) => kid.exitWithin(durationMs + 15_000)))
  exits.forEach((exit, i) => {
    assert.ok(exit, `child ${i} did not finish: ${kids[i].stderr}`)
    assert.equal(exit.code, 0, `child ${i} exited ${exit.code}/${exit.signal}: ${kids[i].stderr}`)
  })
  const reports = await Promise.all(kids.map((kid) => kid.waitFor('done', 1000)))
  const counter = Number(await client.get(keys.COUNTER_KEY))
  return { counter, reports: reports.map((r) => r.data), lockKey: keys.LOCK_KEY }
}

test(`${PROCESSES} processes x ${DURATION_MS / 1000} s of locked GET/pause/SET increments lose no update`, async (t) => {
  const { counter, reports, lockKey } = await run('locked', 'lock', DURATION_MS)
  const sections = reports.reduce((sum, r) => sum + r.sections, 0)
  const lostUpdates = sections - counter
  const seconds = Math.max(...reports.map((r) => r.elapsedMs)) / 1000
  const figures = {
    processes: PROCESSES,
    seconds: Number(seconds.toFixed(2)),
    sections,
    sectionsPerSecond: Number((sections / seconds).toFixed(1)),
    lostUpdates,
    minSectionsPerProcess: Math.min(...reports.map((r) => r.sections)),
  }
  t.diagnostic(JSON.stringify(figures))
  record('contention', `${PROCESSES} processes x ${DURATION_MS / 1000} s of GET/SET increments under waitForLock`, figures)

  assert.ok(sections > 0, 'no critical section ran')
  assert.equal(lostUpdates, 0, `counter ${counter}, but the children ran ${sections} sections`)
  // Each section had its own fencing token: unique, and increasing within each process.
  const fences = reports.flatMap((r) => r.fences)
  assert.equal(fences.length, sections)
  assert.equal(new Set(fences).size, sections, 'two sections shared a fencing token')
  for (const r of reports) {
    assert.ok(r.fences.every((f, i) => i === 0 || f > r.fences[i - 1]), 'fences went backwards within a process')
  }
  assert.equal(await client.exists(`lock:${lockKey}`), 0, 'the lock was left held')
})

test('control: the same increments without the lock do lose updates (the check can fail)', async () => {
  const { counter, reports } = await run('unlocked', 'nolock', 1000)
  const sections = reports.reduce((sum, r) => sum + r.sections, 0)
  assert.ok(counter > 0)
  assert.ok(counter < sections, `no update lost without the lock (${counter} of ${sections}): the check proves nothing`)
})
