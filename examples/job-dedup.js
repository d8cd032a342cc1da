'use strict'

// Job de-duplication: a queue that delivers at least once hands the same job to several
// workers. Each worker takes a lock named after the job id before doing it and marks it done
// while it still holds the lock, so every job is done exactly once.
//
//   node examples/job-dedup.js
//   REDIS_URL=redis://127.0.0.1:6379 node examples/job-dedup.js
const { DistributedLock } = require('native-redis-lock')

const url = process.env.REDIS_URL || 'memory://examples'
const lock = new DistributedLock(url)
const done = new Set() // stands for the job table of your database
const tag = `${process.pid}-${Date.now()}`

async function work(worker, jobId, log) {
  const handle = await lock.tryAcquire(`job:${tag}:${jobId}`, 30_000)
  if (!handle) return log.push(`${worker} skipped ${jobId}: another worker has it`)
  try {
    if (done.has(jobId)) return log.push(`${worker} skipped ${jobId}: already done`)
    await new Promise((resolve) => setTimeout(resolve, 20)) // the job
    done.add(jobId)
    log.push(`${worker} did ${jobId}`)
  } finally {
    await handle.release()
  }
}

async function main() {
  console.log(`backend: ${url.startsWith('memory://') ? url : 'REDIS_URL'}`)
  // Each job delivered twice, to two workers at once.
  const deliveries = ['job-1', 'job-2', 'job-3'].flatMap((job) => [['worker-a', job], ['worker-b', job]])
  const log = []
  await Promise.all(deliveries.map(([worker, job]) => work(worker, job, log)))
  // A late redelivery of a job already done.
  await work('worker-c', 'job-2', log)
  // The jobs done first, then the skips; which worker won a job is a race.
  const skipped = (line) => Number(!line.includes(' did '))
  for (const line of log.sort((x, y) => skipped(x) - skipped(y) || x.localeCompare(y))) console.log(line)
  console.log(`jobs done: ${done.size} of ${deliveries.length + 1} deliveries`)
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
