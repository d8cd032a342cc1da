'use strict'

// npm run bench [-- --quick] [--only=a,b,c,c4,c16,d,e,f,ra,rb,rc] [--placements=unpinned,pinned] [--adapters=id,...]
//               [--report-only] [--merge] [--help]
//
// --merge keeps bench/results.json and replaces only what this run measured (its scenarios,
// placements and adapters; the report says which, when and by what command): rows re-measured
// on a quiet machine without a whole run. Compare only rows measured in the same run.
//
// Runs our package (through its three APIs) and the JavaScript lock peers against one private
// redis-server, scenario by scenario, rounds interleaved with a rotating order, in two CPU
// placements: unpinned, and Redis + Node both pinned to core 0 (when taskset exists). Writes
// bench/results.json, bench/RESULTS.md and bench/chart.svg. See bench/README.md.
const { spawn, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const argv = process.argv.slice(2)
const flag = (name) => argv.includes(`--${name}`)
const option = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1]

const SCENARIO_HELP = {
  a: 'serial pairs (acquire, release) on one key',
  b: '256 pairs in flight on distinct keys',
  c: 'one key, 8 async workers in one process',
  c4: 'one key, 4 processes',
  c16: 'one key, 16 processes',
  d: 'the physical limit: redis-benchmark (needs redis-benchmark)',
  e: 'held auto-refreshed locks: RSS and CPU',
  f: 'the worst event-loop stall releasing 100,000 auto-refreshed locks (ours alone)',
  ra: 'serial pairs on a Redlock over 5 servers',
  rb: '256 pairs in flight on a Redlock over 5 servers',
  rc: '8 waiters on one key on a Redlock over 5 servers',
}

/** The adapters' lines of the usage: read from the adapters, so that they cannot drift. */
function adapterLines() {
  const adapters = require('./adapters')
  const ids = Object.keys(adapters)
  const width = Math.max(...ids.map((id) => id.length))
  try {
    return ids.map((id) => {
      const only = adapters[id].scenarios ? ` [${adapters[id].scenarios.join(',')} only]` : ''
      return `  ${id.padEnd(width)}  ${adapters[id].name} (${adapters[id].kind})${only}`
    })
  } catch (err) {
    // The peers live in bench/node_modules (loaded as an adapter is read): without them, the ids
    // are still worth printing.
    return [`  (cannot load the adapters: ${err.message.split('\n')[0]}; run \`cd bench && npm install\`)`, ...ids.map((id) => `  ${id}`)]
  }
}

/** The usage text. */
function usage() {
  return [
    'usage: npm run bench [-- options]   (or: node bench/run.js [options])',
    '',
    'Runs the lock libraries against a private redis-server and writes bench/RESULTS.md,',
    'bench/chart.svg and bench/results.json (see bench/README.md).',
    '',
    'options:',
    '  --quick                  short rounds, unpinned only: every scenario in under 3 minutes',
    '  --only=a,b,...           run only these scenarios (default: all)',
    '  --placements=unpinned,pinned',
    '                           CPU placements (default: both when taskset exists; unpinned with --quick)',
    '  --adapters=id,...        only these libraries (ids below)',
    '  --merge                  keep bench/results.json, replace only what this run measured',
    '  --report-only            rewrite RESULTS.md and chart.svg from results.json; measure nothing',
    '  --help, -h               print this and exit',
    '',
    'scenarios:',
    ...Object.entries(SCENARIO_HELP).map(([id, text]) => `  ${id.padEnd(4)} ${text}`),
    '',
    'adapters:',
    ...adapterLines(),
    '',
  ].join('\n')
}

// Before anything is measured or started: asking for help, or mistyping an option, must
// never start a run of an hour.
const KNOWN = /^--(quick|merge|report-only|help|(only|placements|adapters)=.*)$/
if (flag('help') || argv.includes('-h')) {
  process.stdout.write(usage())
  process.exit(0)
}
const unknown = argv.filter((a) => !KNOWN.test(a))
const badScenario = (option('only') ?? '').split(',').find((s) => s && !SCENARIO_HELP[s])
if (unknown.length || badScenario) {
  process.stderr.write(`bench/run.js: ${unknown.length ? `unknown option ${unknown[0]}` : `unknown scenario ${badScenario}`}; see --help\n`)
  process.exit(2)
}

const { startRedis } = require('../__test__/helpers/redis-server')
const ADAPTERS = require('./adapters')
const { connect } = require('./lib/redis')
const { rotate, fmt } = require('./lib/util')
const { writeReport } = require('./lib/report')
const { stamp } = require('./lib/runs')

const QUICK = flag('quick')
const PARAMS = QUICK
  ? { rounds: 2, roundMs: 500, pairRounds: 2, pairRoundMs: 500, warmupMs: 250, benchN: 20_000, benchRounds: 1, heldRounds: 1, heldSeconds: 3, heldRssWarmups: 2, heldRssSamples: 1 }
  : { rounds: 5, roundMs: 2000, pairRounds: 15, pairRoundMs: 700, warmupMs: 1000, benchN: 100_000, benchRounds: 3, heldRounds: 2, heldSeconds: 10, heldRssWarmups: 3, heldRssSamples: 3 }
PARAMS.heldLocks = 10_000
PARAMS.heldCpuLocks = 1_000
PARAMS.heldTtlMs = 2000
PARAMS.heldRefreshMs = 1000
PARAMS.releaseLocks = 100_000
PARAMS.releaseTtlMs = 30_000

const SCENARIOS = (option('only') ?? 'a,b,c,c4,c16,d,e,f,ra,rb,rc').split(',')
const ADAPTER_IDS = option('adapters')?.split(',') ?? Object.keys(ADAPTERS)
/** The adapters taking part in `scenario`: an adapter's `scenarios` list, when it has one, limits it. */
const adaptersFor = (scenario) => ADAPTER_IDS.filter((id) => ADAPTERS[id] && (ADAPTERS[id].scenarios ?? [scenario]).includes(scenario))
// (e) takes every library that can keep a lock alive on its own (an adapter with `hold`).
const HELD_ADAPTERS = adaptersFor('e').filter((id) => ADAPTERS[id].holds)
// (ra), (rb) and (rc), a Redlock over 5 servers, take only the adapters made for it.
const REDLOCK_SCENARIOS = ['ra', 'rb', 'rc']
const redlockAdapters = (scenario) => ADAPTER_IDS.filter((id) => ADAPTERS[id]?.scenarios?.includes(scenario))
const OUT_JSON = path.join(__dirname, 'results.json')

function which(cmd) {
  try {
    return execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || null
  } catch {
    return null
  }
}

const TASKSET = which('taskset')
const REDIS_BENCHMARK = which('redis-benchmark')
// --quick stays under 3 minutes by measuring one placement unless told otherwise.
const PLACEMENTS = (option('placements') ?? (TASKSET && !QUICK ? 'unpinned,pinned' : 'unpinned'))
  .split(',')
  .filter((p) => p === 'unpinned' || (p === 'pinned' && TASKSET))

const started = Date.now()
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)} s`
const log = (text) => process.stderr.write(`${text}\n`)

/** Runs a command (under `taskset -c 0` when pinned); resolves its stdout, rejects on failure. */
function exec(pinned, cmd, args, { inheritStderr = true } = {}) {
  const [file, fileArgs] = pinned ? [TASKSET, ['-c', '0', cmd, ...args]] : [cmd, args]
  return new Promise((resolve, reject) => {
    const child = spawn(file, fileArgs, { stdio: ['ignore', 'pipe', inheritStderr ? 'inherit' : 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.on('error', reject)
    child.on('exit', (code, signal) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args[0] ?? ''} exited with ${code ?? signal}`)),
    )
  })
}

// V8 grows its young generation (up to 2 x 16 MB) as the allocation rate climbs and shrinks
// it after full collections: RSS that says nothing about held locks. (e) sizes it up front.
// Its memory reducer runs a few full collections seconds after a burst of allocation (the
// acquisitions) goes quiet: a one-off that would land in the CPU window, not a cost of
// holding locks. Off, for every library; allocation still triggers collections as usual.
const HELD_V8 = ['--min-semi-space-size=16', '--max-semi-space-size=16', '--no-memory-reducer']

async function runNode(pinned, script, config, v8 = []) {
  const outFile = path.join(os.tmpdir(), `nrl-bench-${process.pid}-${Date.now()}.json`)
  try {
    await exec(pinned, process.execPath, ['--expose-gc', ...v8, path.join(__dirname, script), JSON.stringify(config), outFile])
    return JSON.parse(fs.readFileSync(outFile, 'utf8'))
  } finally {
    fs.rmSync(outFile, { force: true })
  }
}

// (d) the physical limit: redis-benchmark with one connection, unpipelined and -P 16.
async function physicalLimit(server, pinned, label) {
  const client = await connect(server.port)
  const sha = await client.script(
    'LOAD',
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
  )
  await client.quit()
  const base = ['-h', '127.0.0.1', '-p', String(server.port), '-n', String(PARAMS.benchN), '-q', '-c', '1', '-r', '1000000']
  const configs = [
    { id: 'set-1', label: 'SET NX PX, 1 connection', args: [...base, 'SET', 'bench:d:__rand_int__', 'token', 'NX', 'PX', '10000'] },
    { id: 'evalsha-1', label: 'EVALSHA compare-and-delete, 1 connection', args: [...base, 'EVALSHA', sha, '1', 'bench:d:__rand_int__', 'token'] },
    { id: 'set-16', label: 'SET NX PX, 1 connection, -P 16', args: [...base, '-P', '16', 'SET', 'bench:d:__rand_int__', 'token', 'NX', 'PX', '10000'] },
    { id: 'evalsha-16', label: 'EVALSHA compare-and-delete, 1 connection, -P 16', args: [...base, '-P', '16', 'EVALSHA', sha, '1', 'bench:d:__rand_int__', 'token'] },
  ]
  const result = {}
  for (const c of configs) result[c.id] = { label: c.label, command: `redis-benchmark ${c.args.join(' ')}`.replace(sha, '<sha>').replace(`-p ${server.port} `, '-p <port> '), rounds: [] }
  for (let r = 0; r < PARAMS.benchRounds; r++) {
    for (const c of rotate(configs, r)) {
      const out = await exec(pinned, REDIS_BENCHMARK, c.args, { inheritStderr: false })
      const matches = [...out.matchAll(/([\d.]+) requests per second/g)]
      const rate = matches.length ? Number(matches[matches.length - 1][1]) : NaN
      result[c.id].rounds.push({ rate })
      log(`[${label}] (d) round ${r + 1}/${PARAMS.benchRounds} ${c.label.padEnd(48)} ${fmt(rate).padStart(9)} requests/s  (${elapsed()})`)
    }
  }
  return result
}

async function heldLocks(server, pinned, label) {
  const result = {}
  for (const id of HELD_ADAPTERS) result[id] = { rounds: [] }
  for (let r = 0; r < PARAMS.heldRounds; r++) {
    for (const id of rotate(HELD_ADAPTERS, r)) {
      const config = {
        port: server.port,
        url: server.url,
        redisPid: server.pid,
        adapter: id,
        locks: PARAMS.heldLocks,
        cpuLocks: PARAMS.heldCpuLocks,
        ttlMs: PARAMS.heldTtlMs,
        refreshMs: PARAMS.heldRefreshMs,
        seconds: PARAMS.heldSeconds,
        rssSamples: PARAMS.heldRssSamples,
        rssWarmups: PARAMS.heldRssWarmups,
        round: r,
        label: `${label} ${elapsed()}`,
      }
      try {
        result[id].rounds.push(await runNode(pinned, 'held.js', config, HELD_V8))
      } catch (err) {
        log(`[${label}] (e) ${id}: ${err.message}`)
        result[id].error = err.message
      }
    }
  }
  return result
}

// (f) ours alone: the worst event-loop stall while releasing many auto-refreshed locks.
async function releaseStall(server, pinned, label) {
  const config = { url: server.url, locks: PARAMS.releaseLocks, ttlMs: PARAMS.releaseTtlMs }
  log(`[${label}] (f) releasing ${PARAMS.releaseLocks} auto-refreshed locks  (${elapsed()})`)
  try {
    const result = await runNode(pinned, 'release-stall.js', config)
    log(`[${label}] (f) worst stall ${fmt(result.worstStallMs, 1)} ms, released in ${fmt(result.releaseMs, 0)} ms  (${elapsed()})`)
    return result
  } catch (err) {
    log(`[${label}] (f) failed: ${err.message}`)
    return { error: err.message }
  }
}

// (ra) serial pairs, (rb) 256 in flight and (rc) 8 waiters on one key, on a Redlock: the
// placement's server and 4 more, pinned alike, as many rounds as (a) and (b).
async function redlockScenario(server, pinned, name, scenario) {
  const more = await Promise.all(Array.from({ length: 4 }, () => startRedis()))
  try {
    const servers = [server, ...more]
    if (pinned) for (const s of more) execFileSync(TASKSET, ['-cp', '0', String(s.pid)], { stdio: 'ignore' })
    const config = {
      port: server.port,
      url: server.url,
      ports: servers.map((s) => s.port),
      urls: servers.map((s) => s.url),
      redisPid: server.pid,
      scenario,
      rounds: PARAMS.pairRounds,
      roundMs: PARAMS.pairRoundMs,
      warmupMs: PARAMS.warmupMs,
      adapters: redlockAdapters(scenario),
      label: name,
    }
    log(`[${name}] (${scenario}) Redlock over 5 servers, ${config.rounds} rounds of ${config.roundMs} ms per library  (${elapsed()})`)
    return await runNode(pinned, 'worker.js', config)
  } catch (err) {
    log(`[${name}] (${scenario}) failed: ${err.message}`)
    return undefined
  } finally {
    await Promise.all(more.map((s) => s.close()))
  }
}

async function placement(name) {
  const pinned = name === 'pinned'
  const server = await startRedis()
  try {
    if (pinned) execFileSync(TASKSET, ['-cp', '0', String(server.pid)], { stdio: 'ignore' })
    log(`== ${name}: redis-server pid ${server.pid} on port ${server.port}${pinned ? ', Redis and Node pinned to core 0' : ''}`)
    const out = {}
    for (const scenario of SCENARIOS) {
      if (['a', 'b', 'c', 'c4', 'c16'].includes(scenario)) {
        // (a) and (b) compare libraries whose ratios sit near 1.0 on a VM whose speed drifts
        // within seconds: many short rounds put each library beside the others more often.
        // (c), (c4) and (c16) start their workers every round, so they keep fewer, longer ones.
        const pairs = scenario === 'a' || scenario === 'b'
        const rounds = pairs ? PARAMS.pairRounds : PARAMS.rounds
        const roundMs = pairs ? PARAMS.pairRoundMs : PARAMS.roundMs
        const config = {
          port: server.port,
          url: server.url,
          redisPid: server.pid,
          scenario,
          rounds,
          roundMs,
          warmupMs: PARAMS.warmupMs,
          adapters: adaptersFor(scenario),
          label: name,
        }
        log(`[${name}] (${scenario}) ${rounds} rounds of ${roundMs} ms per library  (${elapsed()})`)
        try {
          out[scenario] = await runNode(pinned, 'worker.js', config)
        } catch (err) {
          log(`[${name}] (${scenario}) failed: ${err.message}`)
        }
      } else if (REDLOCK_SCENARIOS.includes(scenario)) {
        out[scenario] = await redlockScenario(server, pinned, name, scenario)
      } else if (scenario === 'd') {
        if (!REDIS_BENCHMARK) log(`[${name}] (d) skipped: redis-benchmark is not installed`)
        else out.d = await physicalLimit(server, pinned, name)
      } else if (scenario === 'e') {
        out.e = await heldLocks(server, pinned, name)
      } else if (scenario === 'f') {
        out.f = await releaseStall(server, pinned, name)
      }
    }
    return out
  } finally {
    await server.close()
  }
}

function meta() {
  const version = (pkg) => {
    try {
      return require(path.join(__dirname, 'node_modules', pkg, 'package.json')).version
    } catch {
      return null
    }
  }
  const ours = require('../package.json').version
  const versions = { 'native-redis-lock': ours }
  for (const spec of Object.values(ADAPTERS)) if (spec.package !== 'native-redis-lock') versions[spec.package] = version(spec.package)
  let redis = null
  try {
    redis = execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).trim()
  } catch {}
  return {
    command: `npm run bench${argv.length ? ` -- ${argv.join(' ')}` : ''}`,
    date: new Date().toISOString(),
    quick: QUICK,
    params: PARAMS,
    node: process.version,
    redis,
    cpu: `${os.cpus()[0]?.model ?? 'unknown'} x ${os.cpus().length}`,
    kernel: `${os.type()} ${os.release()}`,
    taskset: Boolean(TASKSET),
    versions,
    adapters: Object.fromEntries(ADAPTER_IDS.map((id) => [id, { name: ADAPTERS[id].name, kind: ADAPTERS[id].kind }])),
  }
}

/** `base` with the scenarios of `run` in place of its own, and a note of what was re-measured. */
function merged(base, run) {
  for (const [name, data] of Object.entries(run.placements)) {
    const into = (base.placements[name] ??= {})
    // Adapter by adapter: rows left out with --adapters keep the base run's figures.
    for (const [scenario, result] of Object.entries(data)) into[scenario] = result && into[scenario] ? { ...into[scenario], ...result } : result
  }
  Object.assign(base.meta.adapters, run.meta.adapters)
  const { command, date, seconds } = run.meta
  const adapters = option('adapters') ? ADAPTER_IDS : null
  base.meta.remeasured = [...(base.meta.remeasured ?? []), { command, date, seconds, scenarios: SCENARIOS, placements: PLACEMENTS, adapters }]
  return base
}

async function main() {
  if (flag('report-only')) {
    writeReport(JSON.parse(fs.readFileSync(OUT_JSON, 'utf8')), __dirname)
    log('wrote bench/RESULTS.md and bench/chart.svg from bench/results.json')
    return
  }
  for (const id of ADAPTER_IDS) if (!ADAPTERS[id]) throw new Error(`unknown adapter ${id}; known: ${Object.keys(ADAPTERS).join(', ')}`)
  log(`native-redis-lock bench${QUICK ? ' (quick)' : ''}: scenarios ${SCENARIOS.join(',')}; placements ${PLACEMENTS.join(', ')}`)
  if (!TASKSET) log('taskset not found: only the unpinned placement runs')
  let results = { meta: meta(), placements: {} }
  for (const name of PLACEMENTS) results.placements[name] = await placement(name)
  stamp(results.placements, results.meta.date)
  results.meta.seconds = (Date.now() - started) / 1000
  if (flag('merge')) results = merged(JSON.parse(fs.readFileSync(OUT_JSON, 'utf8')), results)
  fs.writeFileSync(OUT_JSON, `${JSON.stringify(results, null, 1)}\n`)
  const summary = writeReport(results, __dirname)
  process.stdout.write(`\n${summary}\n`)
  log(`done in ${elapsed()}: bench/RESULTS.md, bench/chart.svg, bench/results.json`)
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
