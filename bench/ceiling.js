'use strict'

// Scenario (c)'s ceiling on this machine, unpinned, for a lock whose next holder waits for
// Redis to confirm each handover: a serial loop of three round trips (the counter's GET and
// SET, and one EVALSHA standing in for the handover), with no lock at all, on two ioredis
// connections to a private redis-server. Ours lends the releaser's lease to the next holder
// (see README.md, "Wake-up on release"), so its section overlaps the handover and can pass it.
// node bench/ceiling.js  ->  loops/s for three 2 s rounds, and ours through bench (c)'s loop
// (8 waitForLock workers) right after each, so both see the same machine.
const Redis = require('ioredis')
const { startRedis } = require('../__test__/helpers/redis-server')
const { requireOurs } = require('./lib/util')

const ROUND_MS = 2000

async function bareLoop(port) {
  const data = new Redis({ port })
  const locks = new Redis({ port })
  const sha = await locks.script('load', "return redis.call('GET', KEYS[1])")
  let loops = 0
  const end = performance.now() + ROUND_MS
  while (performance.now() < end) {
    const value = Number(await data.get('ceiling:counter'))
    await data.set('ceiling:counter', String(value + 1))
    await locks.evalsha(sha, 1, 'ceiling:lock')
    loops++
  }
  data.disconnect()
  locks.disconnect()
  return loops / (ROUND_MS / 1000)
}

async function oursLoop(port, round) {
  const { DistributedLock } = requireOurs('')
  const data = new Redis({ port })
  const lock = new DistributedLock(`redis://127.0.0.1:${port}`, { retryDelayMs: 10 })
  const key = `ceiling:ours:${round}`
  let sections = 0
  const end = performance.now() + ROUND_MS
  const worker = async () => {
    while (performance.now() < end) {
      const handle = await lock.waitForLock(key, 10_000, 10_000)
      const value = Number(await data.get(`${key}:counter`))
      await data.set(`${key}:counter`, String(value + 1))
      sections++
      await handle.release()
    }
  }
  await Promise.all(Array.from({ length: 8 }, worker))
  data.disconnect()
  return sections / (ROUND_MS / 1000)
}

async function main() {
  const server = await startRedis()
  try {
    for (let round = 1; round <= 3; round++) {
      const bare = await bareLoop(server.port)
      const ours = await oursLoop(server.port, round)
      console.log(
        `round ${round}: bare 3-round-trip loop ${Math.round(bare)}/s, ours ${Math.round(ours)} sections/s (${Math.round((100 * ours) / bare)} %)`,
      )
    }
  } finally {
    await server.stop()
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
