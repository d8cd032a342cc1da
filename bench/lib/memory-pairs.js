'use strict'

// DistributedLock acquire + release pairs on memory://, as (a) and (b) make them: the one
// loop of the tools that measure what such a pair costs (memory-cpu.js, callgrind-pairs.js).
const path = require('node:path')

/** A DistributedLock on `memory://<name>` of the package, or of the build ROOT names. */
function memoryLock(name) {
  const { DistributedLock } = require(process.env.ROOT || path.join(__dirname, '..', '..'))
  return new DistributedLock(`memory://${name}`, { keyPrefix: 'lock:', retryDelayMs: 10 })
}

/**
 * `count` pairs on `lock`: one loop on `key` when `width` is 1, else `width` loops on keys of
 * their own. Resolves with the pairs made.
 */
async function runPairs(lock, width, count, key = 'one') {
  let done = 0
  await Promise.all(
    Array.from({ length: width }, async (_, k) => {
      const own = width === 1 ? key : `k${k}`
      while (done < count) {
        done++
        const handle = await lock.acquire(own, 10_000)
        await handle.release()
      }
    }),
  )
  return done
}

module.exports = { memoryLock, runPairs }
