'use strict'

// A long export kept alive with extend(): the lock's TTL is short, so that a crashed exporter
// frees it soon, and the exporter extends it after each chunk while it is still making
// progress. (autoRefresh: true does this for you on a timer; extend() ties the lock to the
// work itself.)
//
//   node examples/long-export.js
//   REDIS_URL=redis://127.0.0.1:6379 node examples/long-export.js
const { DistributedLock } = require('native-redis-lock')

const url = process.env.REDIS_URL || 'memory://examples'
const lock = new DistributedLock(url)
// Chunks of half a second under a 2 s lock: the export outlasts the TTL threefold, and a
// stalled moment (a busy machine) does not cost the lock.
const TTL_MS = 2000
const CHUNKS = 6
const CHUNK_MS = 500

async function main() {
  console.log(`backend: ${url.startsWith('memory://') ? url : 'REDIS_URL'}`)
  const key = `export:customers:${process.pid}`
  const handle = await lock.acquire(key, TTL_MS)
  let extended = 0
  try {
    for (let chunk = 1; chunk <= CHUNKS; chunk++) {
      await new Promise((resolve) => setTimeout(resolve, CHUNK_MS)) // export one chunk
      // Rejects with InvalidLockError if the lock expired or was taken: stop exporting then.
      await handle.extend(TTL_MS)
      extended++
    }
    console.log(`exported ${CHUNKS} chunks in ${CHUNKS * CHUNK_MS} ms with a ${TTL_MS} ms lock`)
    console.log(`extended ${extended} times; still held: ${handle.isHeld}`)
    console.log(`another exporter meanwhile: ${(await lock.tryAcquire(key, TTL_MS)) === null ? 'refused' : 'got it'}`)
  } finally {
    await handle.release()
  }
  console.log(`released; locked now: ${await lock.isLocked(key)}`)
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
