'use strict'

// The main job: WORKERS contenders take one lock for DURATION_MS, each doing a non-atomic
// increment inside it. Prints sections, mutual-exclusion violations, lost updates and the
// time from one holder's release to the next holder's acquire.
//
// Where the lock lives:
//   - REDIS_URL set: worker processes over that Redis;
//   - `--redis`: worker processes over a private redis-server started on a free port;
//   - otherwise: worker_threads of this process over the embedded memory:// backend (no
//     Redis needed).
const { fork } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const path = require('node:path')

const WORKERS = Number(process.env.WORKERS ?? 4)
const DURATION_MS = Number(process.env.DURATION_MS ?? 3000)
const WORKER = path.join(__dirname, 'worker.js')

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : 0
}

/** The embedded backend: worker_threads share one lock table and one counter. */
async function overMemory() {
  // [inside, counter], shared by the threads: the critical section's own bookkeeping.
  const shared = new Int32Array(new SharedArrayBuffer(8))
  const results = await Promise.all(
    Array.from({ length: WORKERS }, (_, id) =>
      new Promise((resolve, reject) => {
        const worker = new Worker(WORKER, { workerData: { url: 'memory://demo', durationMs: DURATION_MS, shared } })
        let report
        worker.on('message', (message) => (report = { id, ...message }))
        worker.on('error', reject)
        worker.on('exit', (code) => (code === 0 && report ? resolve(report) : reject(new Error(`worker ${id} exited with ${code}`))))
      }),
    ),
  )
  return { results, counter: Atomics.load(shared, 1) }
}

/** Worker processes over Redis, with the counter in Redis. */
async function overRedis(url) {
  const Redis = require('ioredis')
  const redis = new Redis(url)
  try {
    await redis.del('demo:counter', 'demo:inside')
    const results = await Promise.all(
      Array.from({ length: WORKERS }, (_, id) =>
        new Promise((resolve, reject) => {
          const child = fork(WORKER, {
            env: { ...process.env, DEMO_REDIS_URL: url, DEMO_DURATION_MS: String(DURATION_MS) },
          })
          let report
          child.on('message', (message) => (report = { id, ...message }))
          child.on('exit', (code) => (code === 0 && report ? resolve(report) : reject(new Error(`worker ${id} exited with ${code}`))))
        }),
      ),
    )
    return { results, counter: Number(await redis.get('demo:counter')) }
  } finally {
    await redis.quit()
  }
}

async function main() {
  const privateRedis = process.argv.includes('--redis')
  let server = null
  let run
  if (process.env.REDIS_URL) {
    console.log(`native-redis-lock demo: ${WORKERS} worker processes, ${DURATION_MS} ms, Redis from REDIS_URL`)
    run = () => overRedis(process.env.REDIS_URL)
  } else if (privateRedis) {
    const { startRedis } = require('../__test__/helpers/redis-server')
    server = await startRedis()
    console.log(`native-redis-lock demo: ${WORKERS} worker processes, ${DURATION_MS} ms, private Redis on port ${server.port}`)
    run = () => overRedis(server.url)
  } else {
    console.log(`native-redis-lock demo: ${WORKERS} worker threads, ${DURATION_MS} ms, embedded backend memory://demo (no Redis; set REDIS_URL or pass --redis for Redis)`)
    run = overMemory
  }
  let outcome
  try {
    outcome = await run()
  } finally {
    await server?.close()
  }
  report(outcome)
}

function report({ results, counter }) {
  const all = results.flatMap((r) => r.sections.map(([acquired, released, fence]) => ({ id: r.id, acquired, released, fence })))
  all.sort((a, b) => a.acquired - b.acquired)
  const handoffs = []
  let ownerChanges = 0
  let fenceOrdered = true
  for (let i = 1; i < all.length; i++) {
    handoffs.push(all[i].acquired - all[i - 1].released)
    if (all[i].id !== all[i - 1].id) ownerChanges++
    if (BigInt(all[i].fence) <= BigInt(all[i - 1].fence)) fenceOrdered = false
  }
  handoffs.sort((a, b) => a - b)
  const violations = results.reduce((n, r) => n + r.violations, 0)
  const seconds = DURATION_MS / 1000

  console.log('')
  for (const r of results) console.log(`  worker ${r.id}: ${r.sections.length} sections`)
  console.log('')
  console.log(`  sections           ${all.length} (${Math.round(all.length / seconds)}/s)`)
  console.log(`  owner changes      ${ownerChanges}`)
  console.log(`  violations         ${violations} (two holders inside at once)`)
  console.log(`  lost updates       ${all.length - counter} (counter ${counter}, expected ${all.length})`)
  console.log(`  fences in order    ${fenceOrdered ? 'yes' : 'NO'}`)
  console.log(`  handoff ms         p50 ${percentile(handoffs, 0.5).toFixed(2)}  p99 ${percentile(handoffs, 0.99).toFixed(2)}  max ${(handoffs.at(-1) ?? 0).toFixed(2)}`)
  if (violations > 0 || counter !== all.length || !fenceOrdered) process.exitCode = 1
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
