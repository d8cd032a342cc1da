'use strict'

// node bench/cost.js [--adapters=id,...] [--pairs=N] [--width=256]
//
// What a pair of the (b) loop costs, in figures that hold on a loaded machine (run.js's pairs/s
// do not): CPU time of this Node process and of the redis-server per pair, and the Redis
// commands per pair by INFO commandstats (in-script ones included) with Redis's own µs for
// each. Each adapter runs in a child process of its own, one after the other, on one private
// redis-server. Pinned, Node and Redis share a core, so the sum of the two CPU figures is
// what bounds (b)'s pairs/s there.
const { execFileSync } = require('node:child_process')
const { startRedis } = require('../__test__/helpers/redis-server')
const ADAPTERS = require('./adapters')
const { connect } = require('./lib/redis')

const argv = process.argv.slice(2)
const option = (name, fallback) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback
const TTL_MS = 10_000

/** INFO commandstats as { command: { calls, usec } }, and Redis's CPU seconds so far. */
async function redisFigures(client) {
  const stats = {}
  for (const line of (await client.info('commandstats')).split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim())
    if (m) stats[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) }
  }
  const cpu = await client.info('cpu')
  const read = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(cpu)[1])
  return { stats, cpuS: read('used_cpu_user') + read('used_cpu_sys') }
}

/** `pairs` acquire + release pairs, `width` loops in flight, each on its own key. */
async function run(adapter, pairs, width) {
  let left = pairs
  const loop = async (i) => {
    const key = `cost:${i}`
    while (left > 0) {
      left--
      const held = await adapter.acquire(key, TTL_MS)
      if (!held) throw new Error(`acquire of ${key} failed`)
      await adapter.release(held)
    }
  }
  await Promise.all(Array.from({ length: width }, (_, i) => loop(i)))
}

async function child(id, port, pairs, width) {
  const adapter = await ADAPTERS[id].create({ port })
  const client = await connect(port)
  await run(adapter, Math.min(pairs, 5000), width)
  const before = await redisFigures(client)
  const cpu = process.cpuUsage()
  await run(adapter, pairs, width)
  const used = process.cpuUsage(cpu)
  const after = await redisFigures(client)
  const commands = {}
  for (const [name, { calls, usec }] of Object.entries(after.stats)) {
    const was = before.stats[name] ?? { calls: 0, usec: 0 }
    if (name === 'info' || calls === was.calls) continue
    commands[name] = { perPair: (calls - was.calls) / pairs, usecPerPair: (usec - was.usec) / pairs }
  }
  await adapter.close?.()
  client.disconnect()
  return {
    id,
    nodeUsPerPair: (used.user + used.system) / pairs,
    redisUsPerPair: ((after.cpuS - before.cpuS) * 1e6) / pairs,
    commands,
  }
}

async function main() {
  const pairs = Number(option('pairs', '40000'))
  const width = Number(option('width', '256'))
  if (option('child')) {
    const result = await child(option('child'), Number(option('port')), pairs, width)
    process.stdout.write(JSON.stringify(result))
    return
  }
  const ids = option('adapters', 'ours-syncguard,ours-syncguard-lock,original-syncguard,original-syncguard-lock').split(',')
  const redis = await startRedis()
  try {
    for (const id of ids) {
      const args = [__filename, `--child=${id}`, `--port=${redis.port}`, `--pairs=${pairs}`, `--width=${width}`]
      const r = JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }))
      const cmds = Object.values(r.commands).reduce((n, c) => n + c.perPair, 0)
      const detail = Object.entries(r.commands)
        .map(([name, c]) => `${name} ${c.perPair.toFixed(2)} (${c.usecPerPair.toFixed(1)} µs)`)
        .join(', ')
      const sum = r.nodeUsPerPair + r.redisUsPerPair
      console.log(
        `${id.padEnd(26)} node ${r.nodeUsPerPair.toFixed(1).padStart(6)} µs/pair, redis ${r.redisUsPerPair.toFixed(1).padStart(6)} µs/pair, sum ${sum.toFixed(1).padStart(6)}; ${cmds.toFixed(2)} cmds/pair: ${detail}`,
      )
    }
  } finally {
    await redis.stop()
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
