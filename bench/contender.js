'use strict'

// One process of scenario (c4): one worker contending for one key, started by worker.js four
// at a time. Sets up its library, prints `ready`, waits for `go` on stdin, then for `ms` takes
// the lock, reads and writes the counter inside it, and releases. Prints one JSON line: the
// counter values it read (each section's sequence number, so the parent can count owner
// changes and check the counter), its waits, and its errors.
//   node bench/contender.js '<json config>'
process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS ??= '10'
process.env.MO_BACKOFF_MAX_DELAY_MS ??= '10'

const ADAPTERS = require('./adapters')
const { connect } = require('./lib/redis')

const { port, url, adapter: id, key, counterKey, ms, ttlMs } = JSON.parse(process.argv[2])

async function main() {
  const data = await connect(port)
  const adapter = await ADAPTERS[id].create({ port, url })
  // Warm-up on a key of its own: connections, scripts, JIT.
  for (let i = 0; i < 20; i++) await adapter.release(await adapter.waitAcquire(`${key}:warm:${process.pid}`, ttlMs, 0))
  process.stdout.write('ready\n')
  await new Promise((resolve) => process.stdin.once('data', resolve))
  const seen = []
  const waits = []
  let errors = 0
  const cpu0 = process.cpuUsage()
  const end = performance.now() + ms
  while (performance.now() < end) {
    const t0 = performance.now()
    let handle
    try {
      handle = await adapter.waitAcquire(key, ttlMs, 0)
    } catch {
      errors++
      continue
    }
    waits.push(performance.now() - t0)
    const value = Number(await data.get(counterKey))
    await data.set(counterKey, String(value + 1))
    seen.push(value)
    await adapter.release(handle)
  }
  const cpu = process.cpuUsage(cpu0)
  process.stdout.write(`${JSON.stringify({ seen, waits, errors, cpuUs: cpu.user + cpu.system })}\n`)
  await adapter.close()
  await data.quit()
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`contender ${id}: ${err.stack}\n`)
    process.exit(1)
  },
)
