'use strict'

// node bench/memory-cpu.js [serialPairs] [inflightPairs]
//
// CPU time of this process per DistributedLock acquire + release pair on memory://, serially
// and 256 in flight (process.cpuUsage), with the time spent waiting for a core (schedstat):
// on a loaded machine pairs/s say more of the load than of the code; the CPU per pair does not.
// ROOT=<a built copy of the package> compares another build in the same conditions.
const fs = require('node:fs')
const { memoryLock, runPairs } = require('./lib/memory-pairs')

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
  const lock = memoryLock('cpu')
  // warm-up
  await runPairs(lock, 1, 5000, 'w')
  let s0 = sched()
  let c0 = process.cpuUsage(), t0 = performance.now()
  await runPairs(lock, 1, N)
  let c = process.cpuUsage(c0), t = performance.now() - t0
  console.log(`serial: ${N} pairs, ${((c.user + c.system) / N).toFixed(2)} us CPU/pair, ${(N / t * 1000).toFixed(0)} pairs/s`)
  {
    const s1 = sched()
    console.log(`  runqueue wait ${((s1.wait-s0.wait)/1e3/N).toFixed(1)} us/pair, wall ${(t*1000/N).toFixed(1)} us/pair`)
  }
  s0 = sched()
  c0 = process.cpuUsage(); t0 = performance.now()
  const done = await runPairs(lock, 256, M)
  c = process.cpuUsage(c0); t = performance.now() - t0
  console.log(`inflight256: ${done} pairs, ${((c.user + c.system) / done).toFixed(2)} us CPU/pair, ${(done / t * 1000).toFixed(0)} pairs/s`)
  {
    const s1 = sched()
    console.log(`  runqueue wait ${((s1.wait-s0.wait)/1e3/done).toFixed(1)} us/pair, wall ${(t*1000/done).toFixed(1)} us/pair`)
  }
  process.exit(0)
}
main().catch((e) => { console.error(e); process.exit(1) })
