'use strict'

// Scenario 8, soak: 1,000,000 acquire/release pairs and 100,000 ExclusiveLock cycles leave
// RSS and the handle count flat after warm-up, and the process exits within 1 s at the end.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { startRedis } = require('../helpers/redis-server')
const { record } = require('./figures')

let server

before(async () => {
  server = await startRedis()
})

after(async () => {
  await server.close()
})

test('a million pairs and 100,000 ExclusiveLock cycles: flat RSS and handles, prompt exit', async () => {
  // V8 grows its young generation (up to 2 x 16 MB) as the allocation rate climbs, and keeps
  // it: RSS that says nothing about leaks. Sized up front, RSS growth is ours.
  const v8 = ['--expose-gc', '--min-semi-space-size=16', '--max-semi-space-size=16']
  const child = spawn(process.execPath, [...v8, path.join(__dirname, '..', 'fixtures', 'fault-soak.js')], {
    env: { ...process.env, REDIS_URL: server.url },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let output = ''
  let printedAt
  child.stdout.on('data', (chunk) => {
    output += chunk
    printedAt ??= performance.now()
  })
  const code = await new Promise((resolve) => child.once('exit', resolve))
  const exitMs = performance.now() - printedAt
  assert.equal(code, 0)
  const result = JSON.parse(output)
  // A leak grows with every operation; an allocator settling in does not. So the second half
  // of the measured pairs must not grow more than noise (8 MB over 350,000 pairs is under 24
  // bytes a pair), nor more than the first half did.
  const firstHalfMb = result.halfway.rss - result.before.rss
  const secondHalfMb = result.pairsDone.rss - result.halfway.rss
  assert.ok(secondHalfMb < 8, `RSS grew ${secondHalfMb.toFixed(1)} MB over the last 350,000 pairs`)
  assert.ok(secondHalfMb <= Math.max(firstHalfMb, 0) + 4, `still growing: ${firstHalfMb.toFixed(1)} then ${secondHalfMb.toFixed(1)} MB`)
  assert.ok(result.after.rss - result.middle.rss < 8, 'RSS grew during the ExclusiveLock cycles')
  assert.ok(result.after.handles <= result.before.handles + 1, `handles ${result.before.handles} -> ${result.after.handles}`)
  assert.ok(result.refreshed > 0, 'the cycles included refreshes')
  assert.ok(exitMs < 1000, `exited ${exitMs.toFixed(0)} ms after finishing`)
  record('soak', 'Soak', {
    pairs: result.pairs,
    exclusiveLockCycles: result.cycles,
    refreshesDuringCycles: result.refreshed,
    pairsPerSecond: Math.round((result.pairs * 0.7) / result.pairSeconds),
    rssAfterWarmupMb: Number(result.before.rss.toFixed(1)),
    rssHalfwayMb: Number(result.halfway.rss.toFixed(1)),
    rssAfterPairsMb: Number(result.pairsDone.rss.toFixed(1)),
    rssAtEndMb: Number(result.after.rss.toFixed(1)),
    handlesAfterWarmup: result.before.handles,
    handlesAtEnd: result.after.handles,
    exitAfterLastOpMs: Math.round(exitMs),
  })
})
