'use strict'

// Where (c4) loses time, per section, for one adapter (issue 26, task c4): 4 processes, one key,
// the bench's GET + SET inside the lock, on a private redis-server. Not a speed figure for
// RESULTS.md: what each section cost and how the lock went from one process to the next.
//   node bench/c4-probe.js <adapter> [--root=<package dir>] [--ms=2000] [--rounds=1]
//        [--stats=1] [--strace=<dir>] [--env=K=V ...]
// --root loads another build of ours (a directory with index.js, lib/, binding.js and its
// .node), for A/B; --stats reads the adapter's stats() around each acquisition, to say how each
// section was won (c contended, w woken, h handed over or granted); --strace writes an strace
// of every process's tokio thread (`native-redis-lock`) there; --env sets a variable in the
// contenders (DEBUG=native-redis-lock: each call's transport, socket or runtime).
// Prints per round: sections/s, owner changes, Node and Redis CPU per section, the gap from
// a release's call to the next holder's acquisition (same owner / owner changed), the GET,
// SET and release times, the owner changes by gap and by how they were won with the longest
// (`tails`), and per thread kind (MAIN, V8's `node`, tokio's) the voluntary and involuntary
// context switches, run and runqueue-wait microseconds, all per section, from
// /proc/<pid>/task/*/status and schedstat.
const { spawn } = require('node:child_process')
const args = process.argv.slice(2)
const opt = (n, d) => args.find((a) => a.startsWith(`--${n}=`))?.slice(n.length + 3) ?? d
const adapterId = args.find((a) => !a.startsWith('--'))
const BENCH = __dirname
const root = opt('root', undefined)
const ms = Number(opt('ms', 2000))
const extraEnv = Object.fromEntries(args.filter((a) => a.startsWith('--env=')).map((a) => a.slice(6).split('=')))
const { startRedis } = require(BENCH + '/../__test__/helpers/redis-server')
const { connect } = require(BENCH + '/lib/redis')

const tids = []
async function round(server, data, i) {
  const keyBase = `probe${i}`
  const key = `${keyBase}:hot`, counterKey = `${keyBase}:counter`
  await data.set(counterKey, '0')
  const url = `redis://127.0.0.1:${server.port}`
  const kids = Array.from({ length: 4 }, () => {
    const child = spawn(process.execPath, [__dirname + '/c4-probe-contender.js', JSON.stringify({ root, port: server.port, url, adapter: adapterId, key, counterKey, ms, ttlMs: 10000, stats: !!opt('stats', '') })], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...extraEnv } })
    let buf = ''
    const lines = []
    const exited = new Promise((r) => child.on('exit', r))
    const ready = new Promise((resolve) => child.stdout.on('data', (c) => { buf += c; let at; while ((at = buf.indexOf('\n')) >= 0) { const l = buf.slice(0, at); buf = buf.slice(at + 1); if (l === 'ready') resolve(); else if (l.startsWith('tids ')) tids.push(l.slice(5)); else lines.push(l) } }))
    return { child, lines, exited, ready }
  })
  await Promise.all(kids.map((k) => k.ready))
  const tracers = []
  if (opt('strace', '')) {
    for (const t of tids) { const [pid, tk] = t.split(' '); for (const tid of tk.split(',').filter(Boolean)) tracers.push(spawn('strace', ['-qq', '-T', '-o', `${opt('strace', '')}/st.${adapterId}.${tid}`, '-p', tid], { stdio: 'ignore' })) }
    await new Promise((r) => setTimeout(r, 500))
  }
  const info0 = await data.info('cpu')
  for (const k of kids) k.child.stdin.write('go\n')
  await Promise.all(kids.map((k) => k.exited))
  for (const t of tracers) t.kill()
  const info1 = await data.info('cpu')
  const rcpu = (s) => { const r = (n) => Number(new RegExp(`${n}:([\\d.]+)`).exec(s)[1]); return (r('used_cpu_user') + r('used_cpu_sys')) * 1e6 }
  const res = kids.map((k) => JSON.parse(k.lines.at(-1)))
  const all = res.flatMap((r, p) => r.times.map((t, j) => ({ p, v: r.seen[j], t })))
  all.sort((a, b) => a.v - b.v)
  const n = all.length
  let changes = 0
  const gapsSame = [], gapsChange = []
  for (let j = 1; j < n; j++) {
    // release called by previous holder -> acquired by next
    const gap = all[j].t[1] - all[j - 1].t[2]
    if (all[j].p !== all[j - 1].p) { changes++; gapsChange.push(gap) } else gapsSame.push(gap)
  }
  const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor(s.length / 2)] : NaN }
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
  const q = (xs) => { const s = [...xs].sort((a, b) => a - b); return [0.5, 0.9].map((f) => (s[Math.floor(s.length * f)] * 1000).toFixed(0)).join('/') }
  const sameIdx = [], chIdx = []
  for (let j = 1; j < n; j++) (all[j].p === all[j - 1].p ? sameIdx : chIdx).push(all[j])
  const getT = (xs) => q(xs.map((x) => x.t[4] - x.t[1])), setT = (xs) => q(xs.map((x) => x.t[2] - x.t[4])), relT = (xs) => q(xs.map((x) => x.t[3] - x.t[2]))
  const detail = { getSame: getT(sameIdx), getCh: getT(chIdx), setSame: setT(sameIdx), setCh: setT(chIdx), relSameP50P90: relT(sameIdx), relChP50P90: relT(chIdx),
    // own release done -> own next acquire call: the JS gap
    heldTotalMs: all.reduce((a, x) => a + x.t[2] - x.t[1], 0).toFixed(0) }
  // owner changes: how late the previous owner came back for the lock after its release
  const nextStart = new Map()
  res.forEach((r, p) => r.times.forEach((t, j) => { if (j + 1 < r.times.length) nextStart.set(`${p}:${j}`, r.times[j + 1][0]) }))
  const idxOf = new Map(); res.forEach((r, p) => r.seen.forEach((v, j) => idxOf.set(v, `${p}:${j}`)))
  const buckets = { back_lt1ms: [0, 0], back_ge1ms: [0, 0] }
  const tails = []
  const gapB = { lt300: [0, 0], lt1000: [0, 0], lt2500: [0, 0], ge2500: [0, 0] }
  for (let j = 1; j < n; j++) {
    if (all[j].p === all[j - 1].p) continue
    const gap = all[j].t[1] - all[j - 1].t[2]
    const ns = nextStart.get(idxOf.get(all[j - 1].v))
    const late = ns === undefined ? 99 : ns - all[j - 1].t[3]
    const b = late < 1 ? buckets.back_lt1ms : buckets.back_ge1ms
    b[0]++; b[1] += gap
    if (gap >= 2.5 && tails.length < 12) {
      const sameProcPrev = res[all[j].p].times.findIndex((t) => t[1] === all[j].t[1])
      const prevOwnSection = sameProcPrev > 0 ? res[all[j].p].times[sameProcPrev - 1] : null
      tails.push({ gapMs: gap.toFixed(2), prevRelMs: (all[j - 1].t[3] - all[j - 1].t[2]).toFixed(2), prevBackAfterMs: late.toFixed(2),
        newWaitStartedBeforeRelMs: (all[j - 1].t[2] - all[j].t[0]).toFixed(2), newOwnPrevRelEndBeforeMs: prevOwnSection ? (all[j - 1].t[2] - prevOwnSection[3]).toFixed(2) : null,
        prevHeldMs: (all[j - 1].t[2] - all[j - 1].t[1]).toFixed(2), how: all[j].t[5], prevHow: all[j - 1].t[5] })
    }
    const g = gap < 0.3 ? gapB.lt300 : gap < 1 ? gapB.lt1000 : gap < 2.5 ? gapB.lt2500 : gapB.ge2500
    g[0]++; g[1] += gap
  }
  const fmt = (o) => Object.fromEntries(Object.entries(o).map(([k, [c, ms]]) => [k, `${c} changes, ${ms.toFixed(0)} ms`]))
  const hows = {}
  for (let j = 1; j < n; j++) { const k = (all[j].p === all[j - 1].p ? 'same ' : 'change ') + all[j].t[5]; const h = (hows[k] ??= [0, 0]); h[0]++; h[1] += all[j].t[1] - all[j - 1].t[2] }
  const changeDetail = { byComeback: fmt(buckets), byGap: fmt(gapB), hows: fmt(hows), tails }
  const held = all.map((x) => x.t[2] - x.t[1]), rel = all.map((x) => x.t[3] - x.t[2])
  const threads = {}
  for (const r of res) for (const [name, p] of Object.entries(r.perThread)) { const q = (threads[name] ??= { n: 0, v: 0, nv: 0, runUs: 0, waitUs: 0, slices: 0 }); for (const f of Object.keys(q)) q[f] += p[f] }
  const per = (x) => (x / n).toFixed(2)
  const out = {
    adapter: adapterId, root: root ?? 'this tree', sections: n, perSec: Math.round(n / (ms / 1000)), ownerChanges: changes, exact: all.every((x, j) => x.v === j),
    nodeCpuUsPerSection: (res.reduce((a, r) => a + r.cpuUs, 0) / n).toFixed(1), redisCpuUsPerSection: ((rcpu(info1) - rcpu(info0)) / n).toFixed(1),
    gapSameMedUs: (med(gapsSame) * 1000).toFixed(0), gapSameMeanUs: (mean(gapsSame) * 1000).toFixed(0), gapChangeMedUs: (med(gapsChange) * 1000).toFixed(0), gapChangeMeanUs: (mean(gapsChange) * 1000).toFixed(0),
    sameTotalMs: gapsSame.reduce((a, b) => a + b, 0).toFixed(0), changeTotalMs: gapsChange.reduce((a, b) => a + b, 0).toFixed(0),
    heldMedUs: (med(held) * 1000).toFixed(0), releaseCallMedUs: (med(rel) * 1000).toFixed(0),
    detail, changeDetail, threads: Object.fromEntries(Object.entries(threads).map(([k, q]) => [k, `n=${q.n} vol/section=${per(q.v)} invol/section=${per(q.nv)} runUs/section=${per(q.runUs)} waitUs/section=${per(q.waitUs)}`])),
  }
  return out
}

async function main() {
  const server = await startRedis()
  const data = await connect(server.port)
  try {
    for (let i = 0; i < Number(opt('rounds', 1)); i++) console.log(JSON.stringify(await round(server, data, i), null, 1))
  } finally { await data.quit(); await server.stop() }
}
main().catch((e) => { console.error(e); process.exit(1) })
