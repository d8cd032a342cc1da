'use strict'

// Scenario (f): how long releasing many auto-refreshed locks blocks the event loop. Holds
// LOCKS `autoRefresh` DistributedLock handles on one connection, then releases them all, 1,000
// calls at a time as held.js does, and reports the worst event-loop stall during the release
// (perf_hooks.monitorEventLoopDelay, and a 1 ms timer's worst lateness as a cross-check) and
// how long the release took. Each release stops its lock's watchdog entry on the JS thread.
//   node bench/release-stall.js               (LOCKS=100000 TTL_MS=30000)
// Uses REDIS_URL when set, else a private redis-server on a free port. Started by run.js as
//   node bench/release-stall.js '<json config>' <out.json>
const fs = require('node:fs')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { startRedis } = require('../__test__/helpers/redis-server')
const { requireOurs, fmt } = require('./lib/util')

const config = process.argv[2] ? JSON.parse(process.argv[2]) : {}
const outFile = process.argv[3]
const LOCKS = Number(config.locks ?? process.env.LOCKS ?? 100_000)
const TTL_MS = Number(config.ttlMs ?? process.env.TTL_MS ?? 30_000)
const BATCH = 1000

/** The worst lateness of a 1 ms interval timer: what a blocked loop makes it miss. */
function driftSampler() {
  let last = performance.now()
  let worst = 0
  const timer = setInterval(() => {
    const now = performance.now()
    worst = Math.max(worst, now - last - 1)
    last = now
  }, 1)
  return {
    stop() {
      clearInterval(timer)
      return worst
    },
  }
}

async function main() {
  const server = config.url || process.env.REDIS_URL ? null : await startRedis()
  const url = config.url ?? process.env.REDIS_URL ?? server.url
  const { DistributedLock } = requireOurs('')
  const { watchdogStats } = requireOurs('lib/native')
  const lock = new DistributedLock(url, { keyPrefix: 'lock:' })
  const run = `bench:f:${process.pid}:${Date.now()}`
  let lost = 0
  const onLost = () => lost++
  // Keeps the connection's watchdog (and its counters) alive past the last release measured.
  const anchor = await lock.tryAcquire(`${run}:anchor`, TTL_MS, { autoRefresh: true, onLost })
  const held = []
  const acquireStarted = performance.now()
  for (let i = 0; i < LOCKS; i += BATCH) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(BATCH, LOCKS - i) }, (_, j) => lock.tryAcquire(`${run}:${i + j}`, TTL_MS, { autoRefresh: true, onLost })),
    )
    if (batch.includes(null)) throw new Error('a lock was not acquired')
    held.push(...batch)
  }
  const acquireMs = performance.now() - acquireStarted
  const before = watchdogStats({ url })
  const watched = before.watched
  if (watched !== LOCKS + 1) throw new Error(`the watchdog keeps ${watched} locks alive, not ${LOCKS + 1}`)

  const histogram = monitorEventLoopDelay({ resolution: 1 })
  histogram.enable()
  const drift = driftSampler()
  const started = performance.now()
  for (let i = 0; i < held.length; i += BATCH) await Promise.all(held.slice(i, i + BATCH).map((h) => h.release()))
  const releaseMs = performance.now() - started
  // One more turn of the loop, so a stall at the very end is sampled too.
  await new Promise((resolve) => setTimeout(resolve, 5))
  histogram.disable()
  const driftMs = drift.stop()
  const stats = watchdogStats({ url })
  const after = stats.watched - 1
  await anchor.release()
  const result = {
    locks: LOCKS,
    ttlMs: TTL_MS,
    acquireMs,
    releaseMs,
    releaseUsPerLock: (releaseMs * 1000) / LOCKS,
    worstStallMs: histogram.max / 1e6,
    p99StallMs: histogram.percentile(99) / 1e6,
    worstTimerDriftMs: driftMs,
    watchedAfter: after,
    // The scheduler's bookkeeping per release, counted: constant, whatever the number held.
    visitedPerRelease: (stats.visited - before.visited) / LOCKS,
    lost,
  }
  const line = (label, value) => process.stdout.write(`${label.padEnd(42)} ${value}\n`)
  line('auto-refreshed locks released', `${LOCKS} (ttl ${TTL_MS} ms, ${BATCH} release calls at a time)`)
  line('time to release them all', `${fmt(releaseMs, 0)} ms (${fmt(result.releaseUsPerLock, 1)} us per lock)`)
  line('worst event-loop stall while releasing', `${fmt(result.worstStallMs, 1)} ms (p99 ${fmt(result.p99StallMs, 1)} ms; 1 ms timer worst late ${fmt(driftMs, 1)} ms)`)
  line('watchdog entries visited per release', fmt(result.visitedPerRelease, 2))
  line('locks still watched after / lost', `${after} / ${lost}`)
  if (outFile) fs.writeFileSync(outFile, JSON.stringify(result))
  await server?.close()
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
