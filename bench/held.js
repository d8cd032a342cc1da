'use strict'

// Scenario (e), one adapter per process (RSS cannot be told apart between libraries sharing a
// process): hold LOCKS auto-refreshed locks and measure RSS per lock, then hold CPU_LOCKS for
// SECONDS and measure this process's CPU (process.cpuUsage: JS thread and native threads),
// Redis's CPU and the Redis commands per second the refreshes cost. Started by run.js:
//   node --expose-gc bench/held.js '<json config>' <out.json>
const fs = require('node:fs')
const ADAPTERS = require('./adapters')
const { connect, commandCalls, diffCalls } = require('./lib/redis')
const { sleep, fmt, median, requireOurs } = require('./lib/util')

const config = JSON.parse(process.argv[2])
const outFile = process.argv[3]
const { port, url, redisPid, adapter: id, locks, cpuLocks, ttlMs, refreshMs, seconds, round, label, rssSamples = 3, rssWarmups = 3 } = config

function progress(text) {
  process.stderr.write(`[${label}] ${text}\n`)
}

function processCpuMs(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return null
  }
}

let collectNative = null

/**
 * Collects garbage, JS and (for ours) native, before an RSS reading: the allocators would
 * return freed memory to the system on their own schedule, making RSS read before or after
 * that moment differ by more than what the locks cost.
 */
async function settle() {
  for (let i = 0; i < 3; i++) {
    global.gc?.()
    collectNative?.()
    await sleep(100)
  }
}

async function holdMany(adapter, prefix, count) {
  const held = []
  for (let i = 0; i < count; i += 500) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(500, count - i) }, (_, j) => adapter.hold(`${prefix}:${i + j}`, ttlMs, refreshMs)),
    )
    if (batch.includes(null)) throw new Error('a lock was not acquired')
    held.push(...batch)
  }
  return held
}

async function releaseAll(adapter, held) {
  // A lock held through `using()` ends with its routine, not with the library's release.
  const release = adapter.releaseHeld ?? adapter.release
  for (let i = 0; i < held.length; i += 1000) await Promise.all(held.slice(i, i + 1000).map((h) => release(h)))
}

async function main() {
  const spec = ADAPTERS[id]
  if (spec.kind === 'ours') collectNative = requireOurs('binding.js').collectNativeMemory
  const admin = await connect(port)
  const adapter = await spec.create({ port, url })
  // Each sample holds LOCKS locks and measures the growth from just before, after one
  // refresh of every lock; then releases them all. The first holds only warm up: what is
  // loaded lazily (scripts, runtime, timers) is loaded, and the allocators have grown to
  // this workload (native ones take a few rounds to stop growing). RSS moves by whole pages
  // as allocators return memory on their own schedule, so the median of the samples is
  // reported. (V8's young generation is sized up front by run.js, for the same reason.)
  const samples = []
  for (let sample = 1 - rssWarmups; sample <= rssSamples; sample++) {
    await settle()
    const rss0 = process.memoryUsage().rss
    const heap0 = process.memoryUsage().heapUsed
    const many = await holdMany(adapter, `bench:e:${round}:${id}:mem${sample}`, locks)
    await sleep(1.5 * refreshMs) // at least one refresh of every lock
    await settle()
    const rss1 = process.memoryUsage().rss
    const heap1 = process.memoryUsage().heapUsed
    await releaseAll(adapter, many)
    many.length = 0
    if (sample > 0) samples.push({ rss: (rss1 - rss0) / locks / 1024, heap: (heap1 - heap0) / locks / 1024 })
  }
  const rssPerLockKB = median(samples.map((s) => s.rss))
  const heapPerLockKB = median(samples.map((s) => s.heap))
  progress(`(e) ${spec.name}: ${locks} held locks, ${fmt(rssPerLockKB, 2)} KB RSS per lock (samples ${samples.map((s) => fmt(s.rss, 2)).join(' ')})`)

  const held = await holdMany(adapter, `bench:e:${round}:${id}:cpu`, cpuLocks)
  await sleep(1.5 * refreshMs)
  // The acquisitions' garbage is collected now, not in the window: it is not holding's cost.
  await settle()
  const lost0 = adapter.lost
  const calls0 = await commandCalls(admin)
  const redis0 = processCpuMs(redisPid)
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await sleep(seconds * 1000)
  const wallMs = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  const redisMs = redis0 === null ? null : processCpuMs(redisPid) - redis0
  const calls = diffCalls(await commandCalls(admin), calls0)
  const lost = adapter.lost - lost0
  await releaseAll(adapter, held)
  const result = {
    rssPerLockKB,
    heapPerLockKB,
    rssSamplesKB: samples.map((s) => s.rss),
    cpuPercent: ((cpu.user + cpu.system) / 1000 / wallMs) * 100,
    redisCpuPercent: redisMs === null ? null : (redisMs / wallMs) * 100,
    commandsPerSec: (calls.total / wallMs) * 1000,
    commands: calls.perCommand,
    lost,
  }
  progress(
    `(e) ${spec.name}: ${cpuLocks} held locks for ${seconds} s: ${fmt(result.cpuPercent, 2)} % CPU, Redis ${fmt(result.redisCpuPercent, 2)} % CPU, ${fmt(result.commandsPerSec)} Redis commands/s, ${lost} lost`,
  )
  await adapter.close()
  await admin.quit()
  fs.writeFileSync(outFile, JSON.stringify(result))
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
