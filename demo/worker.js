'use strict'

// One contender: takes the lock, checks nobody else is inside, does a non-atomic
// read-modify-write of a shared counter, and releases. Reports its sections to the parent.
// A worker_thread (the embedded backend) keeps the counter in shared memory; a worker
// process (Redis) keeps it in Redis.
const path = require('node:path')
const { isMainThread, parentPort, workerData } = require('node:worker_threads')
const { DistributedLock } = require(path.join(__dirname, '..'))

const now = () => performance.timeOrigin + performance.now()
const pause = () => new Promise((resolve) => setTimeout(resolve, Math.random() * 2))

/** The critical section's counter and "who is inside" mark, in shared memory. */
function sharedCounter(shared) {
  return {
    enter: async () => Atomics.add(shared, 0, 1) === 0,
    read: async () => Atomics.load(shared, 1),
    write: async (value) => Atomics.store(shared, 1, value),
    leave: async () => Atomics.sub(shared, 0, 1),
    close: async () => {},
  }
}

/** The same, in Redis. */
function redisCounter(url) {
  const Redis = require('ioredis')
  const redis = new Redis(url)
  return {
    enter: async () => (await redis.incr('demo:inside')) === 1,
    read: async () => Number(await redis.get('demo:counter')),
    write: (value) => redis.set('demo:counter', value),
    leave: () => redis.decr('demo:inside'),
    close: () => redis.quit(),
  }
}

async function main() {
  const threaded = !isMainThread
  const url = threaded ? workerData.url : process.env.DEMO_REDIS_URL
  const durationMs = threaded ? workerData.durationMs : Number(process.env.DEMO_DURATION_MS)
  const counter = threaded ? sharedCounter(workerData.shared) : redisCounter(url)
  const lock = new DistributedLock(url, { keyPrefix: 'demo:lock:', retryDelayMs: 5 })
  const sections = []
  let violations = 0
  const end = Date.now() + durationMs
  while (Date.now() < end) {
    const handle = await lock.waitForLock('counter', 10_000, 2_000)
    const acquiredAt = now()
    if (!(await counter.enter())) violations++
    const value = await counter.read()
    await pause()
    await counter.write(value + 1)
    await counter.leave()
    const releasedAt = now()
    await handle.release()
    sections.push([acquiredAt, releasedAt, handle.fence])
  }
  const report = { sections, violations }
  if (threaded) {
    parentPort.postMessage(report)
    await counter.close()
  } else {
    process.send(report, () => counter.close())
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
