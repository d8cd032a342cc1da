'use strict'
// One process of bench/c4-probe.js: bench/contender.js, plus each thread's context switches
// and schedstat around the loop, and each section's times (acquire called, acquired, GET
// answered, release called, released) on a clock shared by the processes.
process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS ??= '10'
process.env.MO_BACKOFF_MAX_DELAY_MS ??= '10'
const fs = require('node:fs')
const cfg = JSON.parse(process.argv[2])
const BENCH = __dirname
const util = require(BENCH + '/lib/util')
if (cfg.root) util.ours.root = cfg.root
const ADAPTERS = require(BENCH + '/adapters')
const { connect } = require(BENCH + '/lib/redis')
const { port, url, adapter: id, key, counterKey, ms, ttlMs } = cfg

function threads() {
  const out = {}
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      const comm = Number(tid) === process.pid ? 'MAIN' : fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim()
      const st = fs.readFileSync(`/proc/self/task/${tid}/status`, 'utf8')
      const v = Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(st)[1])
      const nv = Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(st)[1])
      const [run, wait, slices] = fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number)
      out[tid] = { comm, v, nv, run, wait, slices }
    } catch {}
  }
  return out
}
const now = () => performance.timeOrigin + performance.now()

async function main() {
  const data = await connect(port)
  const adapter = await ADAPTERS[id].create({ port, url })
  for (let i = 0; i < 20; i++) await adapter.release(await adapter.waitAcquire(`${key}:warm:${process.pid}`, ttlMs, 0))
  const tk = fs.readdirSync('/proc/self/task').filter((t) => { try { return fs.readFileSync(`/proc/self/task/${t}/comm`, 'utf8').startsWith('native-redis') } catch { return false } })
  process.stdout.write(`tids ${process.pid} ${tk.join(',')}\n`)
  process.stdout.write('ready\n')
  await new Promise((resolve) => process.stdin.once('data', resolve))
  const seen = [], times = []
  let errors = 0
  const th0 = threads()
  const cpu0 = process.cpuUsage()
  const end = performance.now() + ms
  while (performance.now() < end) {
    const st0 = cfg.stats && adapter.stats ? adapter.stats() : null
    const t0 = now()
    let handle
    try { handle = await adapter.waitAcquire(key, ttlMs, 0) } catch { errors++; continue }
    const t1 = now()
    let how = ''
    if (st0) { const st1 = adapter.stats(); how = `c${st1.contended - st0.contended}w${st1.woken - st0.woken}h${st1.handedOver - st0.handedOver}` }
    const value = Number(await data.get(counterKey))
    const tg = now()
    await data.set(counterKey, String(value + 1))
    seen.push(value)
    const t2 = now()
    await adapter.release(handle)
    const t3 = now()
    times.push([t0, t1, t2, t3, tg, how])
  }
  const cpu = process.cpuUsage(cpu0)
  const th1 = threads()
  const perThread = {}
  for (const [tid, a] of Object.entries(th1)) {
    const b = th0[tid] || { v: 0, nv: 0, run: 0, wait: 0, slices: 0 }
    const name = a.comm + (th0[tid] ? '' : '(new)')
    const p = (perThread[name] ??= { n: 0, v: 0, nv: 0, runUs: 0, waitUs: 0, slices: 0 })
    p.n++; p.v += a.v - b.v; p.nv += a.nv - b.nv; p.runUs += (a.run - b.run) / 1e3; p.waitUs += (a.wait - b.wait) / 1e3; p.slices += a.slices - b.slices
  }
  process.stdout.write(`${JSON.stringify({ seen, times, errors, cpuUs: cpu.user + cpu.system, perThread, pid: process.pid })}\n`)
  await adapter.close()
  await data.quit()
}
main().then(() => process.exit(0), (err) => { process.stderr.write(`contender ${id}: ${err.stack}\n`); process.exit(1) })
