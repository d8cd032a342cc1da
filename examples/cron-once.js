'use strict'

// A cron job that runs once per cluster: every instance's scheduler fires at the same minute,
// and each asks for a lock named after the job and its run. Only one gets it and runs the job;
// it keeps the lock until its TTL runs out, so an instance whose clock is a little late does
// not run it again for the same minute.
//
//   node examples/cron-once.js
//   REDIS_URL=redis://127.0.0.1:6379 node examples/cron-once.js
const { DistributedLock } = require('native-redis-lock')

const url = process.env.REDIS_URL || 'memory://examples'
const lock = new DistributedLock(url)

async function onSchedule(instance, run) {
  // One attempt, no retries: losing means another instance runs this one.
  const handle = await lock.tryAcquire(`cron:nightly-report:${run}`, 60_000)
  if (!handle) return `${instance} skipped`
  // ... the job itself; the lock is left to expire rather than released, see above.
  return `${instance} ran the report (fence ${handle.fence})`
}

async function main() {
  console.log(`backend: ${url.startsWith('memory://') ? url : 'REDIS_URL'}`)
  const run = `example-${process.pid}-${Date.now()}`
  const outcomes = await Promise.all(['instance-1', 'instance-2', 'instance-3'].map((name) => onSchedule(name, run)))
  for (const line of outcomes) console.log(line)
  console.log(`ran ${outcomes.filter((o) => o.includes(' ran ')).length} time(s) for 3 instances`)
  const late = await onSchedule('instance-4 (late clock)', run)
  console.log(late)
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
