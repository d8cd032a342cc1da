#!/usr/bin/env node
'use strict'

// Two libraries' serial pairs (scenario (a)) in adjacent short windows, alternating, on one
// private redis-server: the ratio of each pair of neighbouring windows, and where each
// library's time goes (Node's CPU and Redis's, per pair). On a VM whose speed swings between
// the 2 s rounds of run.js, neighbouring windows see the same machine.
//
//   node bench/paired.js [ours-exclusive-lock] [original-exclusive-lock] [--windows=24] [--ms=500]
//   node bench/paired.js ours-distributed-lock ours-distributed-lock@/path/to/other/build
//                                             # the same adapter on another build's package
//   node bench/paired.js ... --inflight=256      # 256 pairs in flight, each on its own key
//   taskset -c 0 node bench/paired.js ...     # pinned: Redis is started from here, so it
//                                             # shares the core
//
// Prints the median of the ratios (first ÷ second) with its quartiles, then per library the
// medians of wall time, Node CPU and Redis CPU per pair.
const { startRedis } = require('../__test__/helpers/redis-server')
const { connect } = require('./lib/redis')
const { median, quantile, ours, ROOT } = require('./lib/util')

const args = process.argv.slice(2)
const option = (name, fallback) => Number(args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const [first = 'ours-exclusive-lock', second = 'original-exclusive-lock'] = args.filter((a) => !a.startsWith('--'))
const WINDOWS = option('windows', 24)
const WINDOW_MS = option('ms', 500)
// Pairs kept in flight at once, each on its own key (1: serial pairs, scenario (a)).
const INFLIGHT = option('inflight', 1)

const quartile = (values, q) => quantile([...values].sort((a, b) => a - b), q)

async function main() {
  const server = await startRedis()
  const admin = await connect(server.port)
  const redisCpuUs = async () => {
    const info = await admin.info('cpu')
    const read = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)[1])
    return (read('used_cpu_user') + read('used_cpu_sys')) * 1e6
  }
  try {
    const libraries = []
    for (const [i, id] of [first, second].entries()) {
      const [adapterId, root] = id.split('@')
      const adapter = require(`./adapters/${adapterId}`)
      ours.root = root || ROOT
      const lock = await adapter.create({ port: server.port, url: server.url })
      ours.root = ROOT
      const pair = async (key) => lock.release(await lock.acquire(key, 10_000))
      libraries.push({ name: root ? `${adapter.name}@${root}` : adapter.name, lock, pair, windows: [] })
    }
    const measure = async (library) => {
      const redis0 = await redisCpuUs()
      const cpu0 = process.cpuUsage()
      const start = performance.now()
      let pairs = 0
      const lane = async (key) => {
        while (performance.now() - start < WINDOW_MS) {
          await library.pair(key)
          pairs++
        }
      }
      const name = libraries.indexOf(library)
      await Promise.all(Array.from({ length: INFLIGHT }, (_, j) => lane(`paired:${name}:${j}`)))
      const elapsed = performance.now() - start
      const cpu = process.cpuUsage(cpu0)
      const redis = (await redisCpuUs()) - redis0
      const window = { rate: (pairs / elapsed) * 1000, wallUs: (elapsed * 1000) / pairs, nodeUs: (cpu.user + cpu.system) / pairs, redisUs: redis / pairs }
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
    const shape = INFLIGHT > 1 ? `${INFLIGHT} pairs in flight` : 'serial pairs'
    console.log(`${libraries[0].name} ÷ ${libraries[1].name}, ${shape}, ${WINDOWS} paired windows of ${WINDOW_MS} ms:`)
    console.log(`  median ${median(ratios).toFixed(3)}× (quartiles ${quartile(ratios, 0.25).toFixed(3)}–${quartile(ratios, 0.75).toFixed(3)})`)
    for (const library of libraries) {
      const m = (field) => median(library.windows.map((w) => w[field])).toFixed(1)
      console.log(`  ${library.name}: ${m('wallUs')} µs a pair; Node CPU ${m('nodeUs')} µs, Redis CPU ${m('redisUs')} µs`)
    }
    for (const library of libraries) await library.lock.close?.()
  } finally {
    admin.disconnect()
    await server.close()
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
