'use strict'

// Leader election: every instance asks for the same ExclusiveLock; the one that gets it leads
// and keeps it refreshed, the others stay followers and try again. When the leader steps down
// (or dies, and its lock expires), a follower takes over.
//
//   node examples/leader-election.js                  (the embedded memory:// backend)
//   REDIS_URL=redis://127.0.0.1:6379 node examples/leader-election.js
const ExclusiveLock = require('native-redis-lock/exclusive-lock')

const url = process.env.REDIS_URL || 'memory://examples'

function instance(name) {
  const lock = new ExclusiveLock({ name: 'example-leader', cache_connection: url, lock_contents: name, lock_ttl_ms: 3000, lock_refresh_ms: 1000 })
  // A lost lock is an 'error' event: a leader that hears it must stop leading at once.
  lock.on('error', (err) => console.log(`${name} lost the leadership: ${err.message}`))
  return { name, lock }
}

async function campaign({ name, lock }) {
  const leads = await lock.acquire()
  console.log(`${name} is ${leads ? 'the leader' : 'a follower'}`)
  return leads
}

async function main() {
  console.log(`backend: ${url.startsWith('memory://') ? url : 'REDIS_URL'}`)
  const a = instance('node-a')
  const b = instance('node-b')
  await campaign(a)
  await campaign(b)
  console.log(`the lock says: ${(await b.lock.inspect()).lock_contents} leads`)
  await a.lock.release()
  console.log('node-a steps down')
  await campaign(b)
  await b.lock.release()
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
