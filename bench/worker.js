'use strict'

// One scenario, all adapters, in one Node process: rounds interleaved A B C ... with the
// order rotated every round. Started by run.js (under `taskset -c 0` for the pinned
// placement); prints progress on stderr and writes its JSON result to the file in argv[3].
//   node bench/worker.js '<json config>' <out.json>
process.env.MO_DISTRIBUTED_LOCK_RETRY_DELAY_MS ??= '10'
process.env.MO_BACKOFF_MAX_DELAY_MS ??= '10'

const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const ADAPTERS = require('./adapters')
const { connect, commandCalls, diffCalls } = require('./lib/redis')
const { rotate, quantile, fmt, sleep } = require('./lib/util')

const config = JSON.parse(process.argv[2])
const outFile = process.argv[3]
const { port, url, redisPid, scenario, rounds, roundMs, warmupMs, label } = config
const TTL_MS = 10_000

function progress(text) {
  process.stderr.write(`[${label}] ${text}\n`)
}

/** utime + stime of a process in ms, from /proc (Linux); null elsewhere. */
function processCpuMs(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100 // CLK_TCK is 100 on Linux
  } catch {
    return null
  }
}

// (a) serial acquire + release pairs on one key.
async function serial(adapter, keyBase, ms, _data, limit = Infinity) {
  const key = `${keyBase}:one`
  let ops = 0
  let failed = 0
  const end = performance.now() + ms
  while (performance.now() < end && ops < limit) {
    const handle = await adapter.acquire(key, TTL_MS)
    if (!handle) {
      failed++
      continue
    }
    await adapter.release(handle)
    ops++
  }
  return { ops, failed }
}

/**
 * Requests each adapter sends per uncontended pair, counted with MONITOR (which, unlike INFO
 * commandstats, tells the client's own commands from those run inside a Lua script).
 */
async function requestsPerPair(adapter, keyBase, port) {
  const client = await connect(port)
  const monitor = await client.monitor()
  let fromClient = 0
  let fromScripts = 0
  const mine = `${keyBase}`
  monitor.on('monitor', (time, args, source) => {
    if (source === 'lua') fromScripts++
    else if (!/^(info|ping|monitor|client|hello|select|script)$/i.test(String(args[0]))) fromClient++
  })
  await sleep(50)
  const pairs = 200
  await serial(adapter, mine, 10_000, null, pairs)
  await sleep(100)
  monitor.disconnect()
  client.disconnect()
  return { requests: fromClient / pairs, scriptCommands: fromScripts / pairs }
}

// (b) 256 pairs in flight, each loop on its own key.
async function inflight(adapter, keyBase, ms, _data, width = 256) {
  let ops = 0
  let failed = 0
  const end = performance.now() + ms
  const loop = async (i) => {
    const key = `${keyBase}:${i}`
    while (performance.now() < end) {
      const handle = await adapter.acquire(key, TTL_MS)
      if (!handle) {
        failed++
        continue
      }
      await adapter.release(handle)
      ops++
    }
  }
  await Promise.all(Array.from({ length: width }, (_, i) => loop(i)))
  return { ops, failed }
}

// (c) one key, 8 async workers, each doing GET + SET of a counter inside the lock.
async function contended(adapter, keyBase, ms, data, workers = 8) {
  const key = `${keyBase}:hot`
  const counterKey = `${keyBase}:counter`
  await data.set(counterKey, '0')
  const waits = []
  let sections = 0
  let ownerChanges = 0
  let lastOwner = -1
  let inside = 0
  let overlaps = 0
  let errors = 0
  const end = performance.now() + ms
  const worker = async (w) => {
    while (performance.now() < end) {
      const t0 = performance.now()
      let handle
      try {
        handle = await adapter.waitAcquire(key, TTL_MS, w)
      } catch (err) {
        errors++
        continue
      }
      waits.push(performance.now() - t0)
      if (++inside > 1) overlaps++
      if (lastOwner !== w) {
        ownerChanges++
        lastOwner = w
      }
      const value = Number(await data.get(counterKey))
      await data.set(counterKey, String(value + 1))
      sections++
      inside--
      await adapter.release(handle)
    }
  }
  await Promise.all(Array.from({ length: workers }, (_, w) => worker(w)))
  const counter = Number(await data.get(counterKey))
  waits.sort((a, b) => a - b)
  return {
    ops: sections,
    ownerChanges,
    counter,
    exact: counter === sections && overlaps === 0,
    overlaps,
    errors,
    waitP50: quantile(waits, 0.5),
    waitP99: quantile(waits, 0.99),
    waitMax: waits.length ? waits[waits.length - 1] : NaN,
  }
}

// (c4) one key, 4 processes with one worker each (bench/contender.js), the same section.
async function contendedProcesses({ id }, keyBase, ms, data, processes = 4) {
  const key = `${keyBase}:hot`
  const counterKey = `${keyBase}:counter`
  await data.set(counterKey, '0')
  const children = Array.from({ length: processes }, () => {
    const child = spawn(process.execPath, [path.join(__dirname, 'contender.js'), JSON.stringify({ port, url, adapter: id, key, counterKey, ms, ttlMs: TTL_MS })], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const lines = []
    let buffer = ''
    const exited = new Promise((resolve) => child.on('exit', resolve))
    const ready = new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        buffer += chunk
        let at
        while ((at = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, at)
          buffer = buffer.slice(at + 1)
          if (line === 'ready') resolve()
          else lines.push(line)
        }
      })
      exited.then((code) => reject(new Error(`a contender exited with ${code} before it was ready`)))
    })
    return { child, lines, ready, exited }
  })
  try {
    await Promise.all(children.map((c) => c.ready))
  } catch (err) {
    for (const c of children) c.child.kill()
    throw err
  }
  const calls0 = await commandCalls(data)
  const t0 = performance.now()
  for (const c of children) c.child.stdin.write('go\n')
  const codes = await Promise.all(children.map((c) => c.exited))
  const seconds = Math.min(performance.now() - t0, ms) / 1000
  const calls = diffCalls(await commandCalls(data), calls0)
  if (codes.some((code) => code !== 0)) throw new Error(`contenders exited with ${codes.join(', ')}`)
  const results = children.map((c) => JSON.parse(c.lines.at(-1)))
  // Each section read a distinct counter value, in lock order: sorting by it replays the order
  // the lock went round in.
  const order = results.flatMap((r, p) => r.seen.map((value) => [value, p])).sort((x, y) => x[0] - y[0])
  let ownerChanges = 0
  for (let i = 1; i < order.length; i++) if (order[i][1] !== order[i - 1][1]) ownerChanges++
  const sections = order.length
  const distinct = order.every(([value], i) => value === i)
  const counter = Number(await data.get(counterKey))
  const waits = results.flatMap((r) => r.waits).sort((a, b) => a - b)
  return {
    ops: sections,
    ownerChanges,
    counter,
    exact: counter === sections && distinct,
    overlaps: distinct ? 0 : 1,
    errors: results.reduce((n, r) => n + r.errors, 0),
    waitP50: quantile(waits, 0.5),
    waitP99: quantile(waits, 0.99),
    waitMax: waits.length ? waits[waits.length - 1] : NaN,
    // Measured here, not around the call: the processes start and warm up first.
    seconds,
    commands: calls,
    cpuUs: results.reduce((n, r) => n + r.cpuUs, 0),
  }
}

const RUN = { a: serial, b: inflight, c: contended, c4: contendedProcesses }
// (c16) (c4) with 16 processes.
RUN.c16 = (adapter, keyBase, ms, data) => contendedProcesses(adapter, keyBase, ms, data, 16)
// The scenarios whose workers are processes of their own (bench/contender.js).
const IN_PROCESSES = ['c4', 'c16']
// The scenarios with waiters on one key: owner changes and waits are counted.
const CONTENDED = ['c', 'c4', 'c16', 'rc']

/** `run` with each pair's time (acquire sent to release answered) kept, for p50/p99 in ms. */
function timedPairs(run) {
  return async (adapter, keyBase, ms, data) => {
    const started = new WeakMap()
    const times = []
    const timed = {
      async acquire(key, ttlMs) {
        const t0 = performance.now()
        const handle = await adapter.acquire(key, ttlMs)
        if (handle) started.set(handle, t0)
        return handle
      },
      async release(handle) {
        await adapter.release(handle)
        times.push(performance.now() - started.get(handle))
      },
    }
    const out = await run(timed, keyBase, ms, data)
    times.sort((a, b) => a - b)
    return { ...out, pairP50: quantile(times, 0.5), pairP99: quantile(times, 0.99) }
  }
}
// (ra), (rb) and (rc): (a), (b) and (c) on a Redlock over 5 servers (run.js passes their ports
// and urls); (c)'s counter stays on the first server.
RUN.ra = timedPairs(serial)
RUN.rb = timedPairs(inflight)
RUN.rc = contended

/**
 * With (a): the cost of one call that does no lock work, serially: ours isLocked (one EXISTS)
 * against ioredis EXISTS on the same server. The difference is what crossing from JS to the
 * native side and back costs per call.
 */
async function plainCommand(kind, client, ms) {
  let calls = 0
  const end = performance.now() + ms
  if (kind === 'ours') while (performance.now() < end && (await client.isLocked('bench:plain'), true)) calls++
  else while (performance.now() < end && (await client.exists('bench:plain'), true)) calls++
  return calls
}

async function main() {
  const admin = await connect(port)
  const data = await connect(port)
  const adapters = []
  for (const id of config.adapters) {
    const spec = ADAPTERS[id]
    try {
      const instance = await spec.create({ port, url, ports: config.ports, urls: config.urls })
      adapters.push({ id, spec, instance })
    } catch (err) {
      progress(`${spec.name}: cannot start (${err.message}); skipped`)
    }
  }
  const results = {}
  for (const { id } of adapters) results[id] = { rounds: [] }
  const run = RUN[scenario]

  // Warm-up (JIT, connections, script cache); not recorded. The processes of (c4) and (c16) warm
  // themselves up.
  for (const { id, spec, instance } of IN_PROCESSES.includes(scenario) ? [] : adapters) {
    try {
      await run(instance, `bench:${scenario}:warm:${id}`, warmupMs, data)
    } catch (err) {
      progress(`${spec.name}: warm-up failed: ${err.stack}`)
      results[id].error = String(err.message)
    }
  }

  if (scenario === 'a') {
    for (const { id, spec, instance } of adapters) {
      if (results[id].error) continue
      try {
        results[id].monitor = await requestsPerPair(instance, `bench:monitor:${id}`, port)
        progress(`(a) ${spec.name}: ${results[id].monitor.requests} requests + ${results[id].monitor.scriptCommands} commands inside scripts per pair (MONITOR)`)
      } catch (err) {
        progress(`${spec.name}: MONITOR count failed: ${err.message}`)
      }
    }
  }

  let plain = null
  if (scenario === 'a' && config.adapters.includes('ours-distributed-lock')) {
    const { DistributedLock } = require('./lib/util').requireOurs('')
    plain = { ours: new DistributedLock(url), ioredis: admin, rounds: { ours: [], ioredis: [] } }
    await plainCommand('ours', plain.ours, warmupMs / 2)
    await plainCommand('ioredis', plain.ioredis, warmupMs / 2)
  }

  for (let r = 0; r < rounds; r++) {
    if (plain) {
      for (const kind of r % 2 ? ['ioredis', 'ours'] : ['ours', 'ioredis']) {
        const t0 = performance.now()
        const calls = await plainCommand(kind, plain[kind], roundMs / 2)
        const rate = calls / ((performance.now() - t0) / 1000)
        plain.rounds[kind].push({ rate, usPerCall: 1e6 / rate })
        progress(`(a) round ${r + 1}/${rounds} one plain EXISTS, ${kind === 'ours' ? 'ours isLocked' : 'ioredis exists'}: ${fmt(rate)} calls/s (${fmt(1e6 / rate, 0)} µs/call)`)
      }
    }
    for (const { id, spec, instance } of rotate(adapters, r)) {
      if (results[id].error) continue
      global.gc?.()
      await sleep(20)
      const calls0 = await commandCalls(admin)
      const redis0 = processCpuMs(redisPid)
      const cpu0 = process.cpuUsage()
      const t0 = performance.now()
      let out
      try {
        out = await run(IN_PROCESSES.includes(scenario) ? { id } : instance, `bench:${scenario}:${r}:${id}`, roundMs, data)
      } catch (err) {
        progress(`${spec.name}: round ${r + 1} failed: ${err.stack}`)
        results[id].error = String(err.message)
        continue
      }
      const seconds = out.seconds ?? (performance.now() - t0) / 1000
      const cpu = process.cpuUsage(cpu0)
      if (out.cpuUs !== undefined) Object.assign(cpu, { user: out.cpuUs, system: 0 })
      const redisCpu = redis0 === null ? null : processCpuMs(redisPid) - redis0
      const calls = out.commands ?? diffCalls(await commandCalls(admin), calls0)
      const round = {
        ...out,
        seconds,
        rate: out.ops / seconds,
        commandsPerOp: calls.total / Math.max(1, out.ops),
        commands: calls.perCommand,
        nodeCpuUsPerOp: ((cpu.user + cpu.system) / Math.max(1, out.ops)),
        nodeCpuPercent: ((cpu.user + cpu.system) / 1000 / (seconds * 1000)) * 100,
        redisCpuPercent: redisCpu === null ? null : (redisCpu / (seconds * 1000)) * 100,
      }
      if (CONTENDED.includes(scenario)) round.ownerChangesPerSec = out.ownerChanges / seconds
      results[id].rounds.push(round)
      let extra = ''
      if (CONTENDED.includes(scenario)) {
        extra = `, ${fmt(round.ownerChangesPerSec)} owner changes/s, wait p99 ${fmt(out.waitP99, 1)} ms, counter ${out.exact ? 'exact' : `WRONG (${out.counter} vs ${out.ops}, overlaps ${out.overlaps})`}`
      }
      if (out.pairP50 !== undefined) extra += `, pair p50 ${fmt(out.pairP50, 2)} ms p99 ${fmt(out.pairP99, 2)} ms`
      if (out.failed) extra += `, ${out.failed} failed acquires`
      if (out.errors) extra += `, ${out.errors} wait errors`
      progress(`(${scenario}) round ${r + 1}/${rounds} ${spec.name.padEnd(30)} ${fmt(round.rate).padStart(9)} /s, ${fmt(round.commandsPerOp, 2)} cmds/op${extra}`)
    }
  }

  for (const { spec, instance } of adapters) {
    try {
      await instance.close()
    } catch (err) {
      progress(`${spec.name}: close failed: ${err.message}`)
    }
  }
  await admin.quit()
  await data.quit()
  fs.writeFileSync(outFile, JSON.stringify(plain ? { ...results, _plainCommand: plain.rounds } : results))
}

main().then(
  () => process.exit(0), // a peer's stray timer must not keep the worker alive
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
