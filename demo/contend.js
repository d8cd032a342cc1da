'use strict'

// The main job: WORKERS processes contend for one lock for DURATION_MS, each doing a
// non-atomic increment inside it. Prints sections, mutual-exclusion violations, lost
// updates and the time from one holder's release to the next holder's acquire.
// Uses REDIS_URL when set, else starts a private redis-server on a free port.
const { fork } = require('node:child_process')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis } = require('../__test__/helpers/redis-server')

const WORKERS = Number(process.env.WORKERS ?? 4)
const DURATION_MS = Number(process.env.DURATION_MS ?? 3000)

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : 0
}

async function main() {
  const server = process.env.REDIS_URL ? null : await startRedis()
  const url = process.env.REDIS_URL ?? server.url
  console.log(`native-redis-lock demo: ${WORKERS} worker processes, ${DURATION_MS} ms, Redis ${server ? `private on port ${server.port}` : 'from REDIS_URL'}`)
  const redis = new Redis(url)
  await redis.del('demo:counter', 'demo:inside')

  const results = await Promise.all(
    Array.from({ length: WORKERS }, (_, id) =>
      new Promise((resolve, reject) => {
        const child = fork(path.join(__dirname, 'worker.js'), {
          env: { ...process.env, DEMO_REDIS_URL: url, DEMO_DURATION_MS: String(DURATION_MS) },
        })
        let report
        child.on('message', (message) => (report = { id, ...message }))
        child.on('exit', (code) => (code === 0 && report ? resolve(report) : reject(new Error(`worker ${id} exited with ${code}`))))
      }),
    ),
  )

  const all = results.flatMap((r) => r.sections.map(([acquired, released, fence]) => ({ id: r.id, acquired, released, fence })))
  all.sort((a, b) => a.acquired - b.acquired)
  const handoffs = []
  let ownerChanges = 0
  let fenceOrdered = true
  for (let i = 1; i < all.length; i++) {
    handoffs.push(all[i].acquired - all[i - 1].released)
    if (all[i].id !== all[i - 1].id) ownerChanges++
    if (all[i].fence <= all[i - 1].fence) fenceOrdered = false
  }
  handoffs.sort((a, b) => a - b)
  const counter = Number(await redis.get('demo:counter'))
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

  await redis.quit()
  await server?.close()
  if (violations > 0 || counter !== all.length || !fenceOrdered) process.exitCode = 1
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
