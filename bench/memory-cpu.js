'use strict'

// node bench/memory-cpu.js [serialPairs] [inflightPairs]
//
// CPU time of this process per DistributedLock acquire + release pair on memory://, serially
// and 256 in flight (process.cpuUsage), with the time spent waiting for a core (schedstat):
// on a loaded machine pairs/s say more of the load than of the code; the CPU per pair does not.
// ROOT=<a built copy of the package> compares another build in the same conditions.
const path = require('node:path')
const root = process.env.ROOT || path.join(__dirname, '..')
const { DistributedLock } = require(root)
const fs = require('node:fs')

/** Nanoseconds this process's threads ran and waited for a core (Linux schedstat). */
function sched() {
  let run = 0
  let wait = 0
  for (const task of fs.readdirSync('/proc/self/task')) {
    const [ran, waited] = fs.readFileSync(`/proc/self/task/${task}/schedstat`, 'utf8').split(' ').map(Number)
    run += ran
    wait += waited
  }
  return { run, wait }
}
const N = Number(process.argv[2] ?? 200000)
const M = Number(process.argv[3] ?? 200000)
async function main() {
  const lock = new DistributedLock('memory://cpu', { keyPrefix: 'lock:', retryDelayMs: 10 })
  // warm-up
  for (let i = 0; i < 5000; i++) { const h = await lock.acquire('w', 10000); await h.release() }
  let s0 = sched()
  let c0 = process.cpuUsage(), t0 = performance.now()
  for (let i = 0; i < N; i++) { const h = await lock.acquire('one', 10000); await h.release() }
  let c = process.cpuUsage(c0), t = performance.now() - t0
  console.log(`serial: ${N} pairs, ${((c.user + c.system) / N).toFixed(2)} us CPU/pair, ${(N / t * 1000).toFixed(0)} pairs/s`)
  {
    const s1 = sched()
    console.log(`  runqueue wait ${((s1.wait-s0.wait)/1e3/N).toFixed(1)} us/pair, wall ${(t*1000/N).toFixed(1)} us/pair`)
  }
  const width = 256
  s0 = sched()
  let done = 0
  c0 = process.cpuUsage(); t0 = performance.now()
  await Promise.all(Array.from({ length: width }, async (_, k) => {
    while (done < M) { done++; const h = await lock.acquire(`k${k}`, 10000); await h.release() }
  }))
  c = process.cpuUsage(c0); t = performance.now() - t0
  console.log(`inflight256: ${done} pairs, ${((c.user + c.system) / done).toFixed(2)} us CPU/pair, ${(done / t * 1000).toFixed(0)} pairs/s`)
  {
    const s1 = sched()
    console.log(`  runqueue wait ${((s1.wait-s0.wait)/1e3/done).toFixed(1)} us/pair, wall ${(t*1000/done).toFixed(1)} us/pair`)
  }
  process.exit(0)
}
main().catch((e) => { console.error(e); process.exit(1) })
