'use strict'

// How much 10,000 (or HELD) auto-refreshed ExclusiveLocks on one connection cost: Redis
// round trips per refresh tick, RSS per held lock, and CPU while holding.
//   node bench/held-locks.js            (HELD=10000 TTL_MS=2000 REFRESH_MS=1000 SECONDS=10)
// Uses REDIS_URL when set, else a private redis-server.
const ExclusiveLock = require('../exclusive-lock')
const { watchdogStats } = require('../lib/native')
const { startRedis } = require('../__test__/helpers/redis-server')

const HELD = Number(process.env.HELD ?? 10_000)
const TTL_MS = Number(process.env.TTL_MS ?? 2000)
const REFRESH_MS = Number(process.env.REFRESH_MS ?? 1000)
const SECONDS = Number(process.env.SECONDS ?? 10)

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main() {
  const server = process.env.REDIS_URL ? null : await startRedis()
  const url = process.env.REDIS_URL ?? server.url
  const connection = { url }
  global.gc?.()
  await sleep(200)
  const rssBefore = process.memoryUsage().rss
  const locks = []
  for (let i = 0; i < HELD; i++) {
    locks.push(new ExclusiveLock({ name: `held-${i}`, cache_connection: url, lock_ttl_ms: TTL_MS, lock_refresh_ms: REFRESH_MS }))
  }
  for (let i = 0; i < HELD; i += 500) {
    const won = await Promise.all(locks.slice(i, i + 500).map((lock) => lock.acquire()))
    if (won.includes(false)) throw new Error('a lock was not acquired')
  }
  let lost = 0
  for (const lock of locks) lock.on('error', () => lost++)
  await sleep(2 * REFRESH_MS) // let the refresh phases settle into shared ticks
  global.gc?.()
  const rssHeld = process.memoryUsage().rss
  const before = watchdogStats(connection)
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  await sleep(SECONDS * 1000)
  const cpu = process.cpuUsage(cpuBefore)
  const wall = performance.now() - started
  const after = watchdogStats(connection)
  const pipelines = after.pipelines - before.pipelines
  const refreshes = after.refreshes - before.refreshes
  const ticks = (SECONDS * 1000) / REFRESH_MS

  console.log(`held locks                 ${HELD} (ttl ${TTL_MS} ms, refresh ${REFRESH_MS} ms, ${SECONDS} s)`)
  console.log(`refreshes                  ${refreshes} (${(refreshes / HELD / ticks).toFixed(2)} per lock per refresh period)`)
  console.log(`pipelines (round trips)    ${pipelines} (${(pipelines / ticks).toFixed(2)} per refresh period)`)
  console.log(`locks lost                 ${lost}`)
  console.log(`RSS per held lock          ${((rssHeld - rssBefore) / HELD / 1024).toFixed(2)} KB`)
  console.log(`CPU while holding          ${(((cpu.user + cpu.system) / 1000 / wall) * 100).toFixed(2)} % of a core`)

  for (let i = 0; i < HELD; i += 1000) await Promise.all(locks.slice(i, i + 1000).map((lock) => lock.release()))
  await server?.close()
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
