'use strict'

// Fenced writes: a holder can pause (a GC pause, a stalled VM) past its TTL while another
// process takes the lock. Its lock is gone, but it does not know yet. A store that checks
// fences refuses its late write, because every new holder's fence is higher.
//
//   node examples/fenced-writes.js
//   REDIS_URL=redis://127.0.0.1:6379 node examples/fenced-writes.js
const { DistributedLock } = require('native-redis-lock')

const url = process.env.REDIS_URL || 'memory://examples'
const lock = new DistributedLock(url)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A store that remembers the highest fence that wrote to it (fences compare as strings). */
class FencedStore {
  constructor() {
    this.value = null
    this.fence = ''
  }

  write(value, fence) {
    if (fence < this.fence) return false
    this.value = value
    this.fence = fence
    return true
  }
}

async function main() {
  console.log(`backend: ${url.startsWith('memory://') ? url : 'REDIS_URL'}`)
  const key = `account:${process.pid}`
  const store = new FencedStore()
  const a = await lock.acquire(key, 100)
  await sleep(250) // A stalls past its TTL...
  const b = await lock.acquire(key, 5000) // ...and B takes the lock meanwhile
  console.log(`B's fence is higher than A's: ${b.fence > a.fence}`)
  console.log(`B writes: ${store.write('balance=120 (B)', b.fence) ? 'accepted' : 'refused'}`)
  console.log(`A wakes up and writes: ${store.write('balance=100 (A)', a.fence) ? 'accepted' : 'refused'}`)
  console.log(`stored: ${store.value}`)
  // The same check, done by Redis: fencedSet writes a hash { value, fence } unless a higher
  // fence wrote there.
  const target = `balance:${process.pid}`
  console.log(`fencedSet by B: ${await lock.fencedSet(target, '120', b.fence)}`)
  console.log(`fencedSet by A: ${await lock.fencedSet(target, '100', a.fence)}`)
  await b.release()
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
