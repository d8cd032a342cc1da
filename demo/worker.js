'use strict'

// One contender: takes the lock, checks nobody else is inside, does a non-atomic
// read-modify-write of a shared counter, and releases. Reports its sections to the parent.
const path = require('node:path')
const Redis = require('ioredis')
const { DistributedLock } = require(path.join(__dirname, '..'))

const [url, durationMs] = [process.env.DEMO_REDIS_URL, Number(process.env.DEMO_DURATION_MS)]
const now = () => performance.timeOrigin + performance.now()

async function main() {
  const redis = new Redis(url)
  const lock = new DistributedLock(redis, { keyPrefix: 'demo:lock:', retryDelayMs: 5 })
  const sections = []
  let violations = 0
  const end = Date.now() + durationMs
  while (Date.now() < end) {
    const handle = await lock.waitForLock('counter', 10_000, 2_000)
    const acquiredAt = now()
    if ((await redis.incr('demo:inside')) !== 1) violations++
    const value = Number(await redis.get('demo:counter'))
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 2))
    await redis.set('demo:counter', value + 1)
    await redis.decr('demo:inside')
    const releasedAt = now()
    await handle.release()
    sections.push([acquiredAt, releasedAt, handle.fence])
  }
  process.send({ sections, violations }, () => redis.quit())
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
