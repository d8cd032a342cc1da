#!/usr/bin/env node
'use strict'

// Two libraries' serial pairs (scenario (a)), or pairs kept in flight (scenario (b):
// --inflight=256), in adjacent short windows, alternating, on one private redis-server: the
// ratio of each pair of neighbouring windows, and where each library's time goes (Node's CPU
// and Redis's, per pair). On a VM whose speed swings between the 2 s rounds of run.js,
// neighbouring windows see the same machine.
//
//   node bench/paired.js [ours-exclusive-lock] [original-exclusive-lock] [--windows=24] [--ms=500] [--inflight=256]
//   taskset -c 0 node bench/paired.js ...     # pinned: Redis is started from here, so it
//                                             # shares the core
//
// An adapter of ours may name the copy of the package it loads, `ours-distributed-lock@/tmp/a`
// (a directory holding index.js, lib/, binding.js and the .node file of another build): two
// builds of ours, A/B, in one process.
//
// --servers=5 starts 5 servers for the Redlock adapters (`ours-redlock`, `redlock4-five`,
// `sesamecare-redlock-five`, as in (ra)/(rb)): Redis CPU is then the sum over the 5, and the
// commands per pair are per server (INFO commandstats, in-script ones included).
//
// Prints the median of the ratios (first ÷ second) with its quartiles, then per library the
// medians of wall time, Node CPU and Redis CPU per pair.
const { startRedis } = require('../__test__/helpers/redis-server')
const ADAPTERS = require('./adapters')
const { connect, commandCalls } = require('./lib/redis')
const { median, quantile, ours, ROOT } = require('./lib/util')

const args = process.argv.slice(2)
const option = (name, fallback) => Number(args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const [first = 'ours-exclusive-lock', second = 'original-exclusive-lock'] = args.filter((a) => !a.startsWith('--'))
const WINDOWS = option('windows', 24)
const WINDOW_MS = option('ms', 500)
const INFLIGHT = option('inflight', 0)
const SERVERS = option('servers', 1)

const quartile = (values, q) => quantile([...values].sort((a, b) => a - b), q)

async function main() {
  const servers = await Promise.all(Array.from({ length: SERVERS }, () => startRedis()))
  const [server] = servers
  const admins = await Promise.all(servers.map((s) => connect(s.port)))
  const redisCpuUs = async () => {
    let total = 0
    for (const admin of admins) {
      const info = await admin.info('cpu')
      const read = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)[1])
      total += (read('used_cpu_user') + read('used_cpu_sys')) * 1e6
    }
    return total
  }
  const commands = async () => {
    let total = 0
    for (const admin of admins) total += (await commandCalls(admin)).total
    return total
  }
  try {
    const libraries = []
    for (const [i, spec] of [first, second].entries()) {
      const [id, root] = spec.split('@')
      const adapter = ADAPTERS[id] ?? require(`./adapters/${id}`)
      ours.root = root ?? ROOT
      const lock = await adapter.create({
        port: server.port,
        url: server.url,
        ports: servers.map((s) => s.port),
        urls: servers.map((s) => s.url),
      })
      ours.root = ROOT
      const key = `paired:${i}`
      const name = root ? `${adapter.name} (${root})` : adapter.name
      libraries.push({ name, lock, key, windows: [] })
    }
    /** Pairs on `key` until `end`; how many. */
    const loop = async (lock, key, end) => {
      let pairs = 0
      while (performance.now() < end) {
        await lock.release(await lock.acquire(key, 10_000))
        pairs++
      }
      return pairs
    }
    const run = async ({ lock, key }, end) => {
      if (INFLIGHT === 0) return loop(lock, key, end)
      const counts = await Promise.all(Array.from({ length: INFLIGHT }, (_, j) => loop(lock, `${key}:${j}`, end)))
      return counts.reduce((a, b) => a + b, 0)
    }
    const measure = async (library) => {
      const redis0 = await redisCpuUs()
      const commands0 = await commands()
      const cpu0 = process.cpuUsage()
      const start = performance.now()
      const pairs = await run(library, start + WINDOW_MS)
      const elapsed = performance.now() - start
      const cpu = process.cpuUsage(cpu0)
      const redis = (await redisCpuUs()) - redis0
      const sent = (await commands()) - commands0 // commandCalls leaves out INFO
      const window = {
        rate: (pairs / elapsed) * 1000,
        wallUs: (elapsed * 1000) / pairs,
        nodeUs: (cpu.user + cpu.system) / pairs,
        redisUs: redis / pairs,
        commands: sent / pairs / SERVERS,
      }
      library.windows.push(window)
      return window.rate
    }
    for (const library of libraries) await measure(library) // warm-up
    for (const library of libraries) library.windows.length = 0
    const ratios = []
    for (let i = 0; i < WINDOWS; i++) {
      // Alternate which goes first, so neither always follows the other.
      const [a, b] = i % 2 ? [libraries[1], libraries[0]] : libraries
      const rates = new Map([[a, await measure(a)], [b, await measure(b)]])
      ratios.push(rates.get(libraries[0]) / rates.get(libraries[1]))
    }
    const where = SERVERS > 1 ? `, ${SERVERS} servers` : ''
    console.log(`${libraries[0].name} ÷ ${libraries[1].name}, ${INFLIGHT ? `${INFLIGHT} pairs in flight` : 'serial pairs'}${where}, ${WINDOWS} paired windows of ${WINDOW_MS} ms:`)
    console.log(`  median ${median(ratios).toFixed(3)}× (quartiles ${quartile(ratios, 0.25).toFixed(3)}–${quartile(ratios, 0.75).toFixed(3)})`)
    for (const library of libraries) {
      const m = (field) => median(library.windows.map((w) => w[field])).toFixed(1)
      const perServer = SERVERS > 1 ? ` (all ${SERVERS})` : ''
      console.log(`  ${library.name}: ${m('wallUs')} µs a pair; Node CPU ${m('nodeUs')} µs, Redis CPU${perServer} ${m('redisUs')} µs, ${m('commands')} Redis commands per server`)
    }
    for (const library of libraries) await library.lock.close?.()
  } finally {
    for (const admin of admins) admin.disconnect()
    await Promise.all(servers.map((s) => s.close()))
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
