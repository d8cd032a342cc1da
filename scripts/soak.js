'use strict'

// The soak (issue 26; docs/plans/cross-process.md §5): mixed traffic on every API and
// backend, in this process and in children, for --minutes, with the lock redis-server
// SIGKILLed and restarted empty every --restart-every seconds and a child SIGKILLed and
// respawned every --respawn-every seconds. Prints a line a minute and JSON at the end; exits
// 1 when a fail rule of §5 is broken (scripts/soak/verdict.js).
//
//   npm run soak -- --minutes=30 [--restart-every=180] [--processes=4] [--backends=redis,memory]
//                   [--respawn-every=300] [--actors=2] [--json=FILE] [--excuse-restarts=yes]
//                   [--stall-every=SECONDS] [--restart-quarantine-ms=2000]
//
// --stall-every stops a child (SIGSTOP) for 1.6-2.4 s, past most TTLs of the traffic, on that
// schedule: the stall a loaded machine can cause, on purpose. Its holders' locks expire and
// move on; the overlaps this makes are the kind the sections rule counts, not fails, when the
// library told the stalled holder (scripts/soak/sections.js).
//
// SOAK_APIS=dl.,sg. (environment) runs only those APIs' actors, to chase one of them;
// SOAK_OPS=dl.using,dl.acquire only those operations of them.
//
// --restart-quarantine-ms (2000 by default) is given to every lock the soak makes on the
// redis-server (README "Restart quarantine"): no lock is given on a restarted server for that
// long, so every running holder is told before a contender acquires, and two holders at once
// across a restart fail like any other overlap. 2000 is above every TTL of the traffic, so a
// holder granted before a kill has, by its own account, lost its lease before any grant on the
// restarted server. 0 turns it off (the library's default): the restart's overlaps are then the
// documented case of the option being off.
//
// --excuse-restarts=yes (only with --restart-quarantine-ms=0) counts, rather than fails, two
// holders at once when the first one's section spans a SIGKILL of the lock server: Redis
// restarted empty, and with no quarantine a contender can take the key before the holder,
// though told its lock is in doubt, writes (scripts/soak/sections.js). Without it the rules
// are §5's, strictly.
//
// The parent also watches the wall clock against the monotonic one (scripts/soak/wall-clock.js):
// Redis counts PX on its wall clock, so a step forward ends leases early with no holder told.
// The JSON lists the steps, and an overlap after one says so on its line.
const { fork } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedis } = require('../__test__/helpers/redis-server')
const { runProcess } = require('./soak/worker')
const { checkSections } = require('./soak/sections')
const { addCounts, resourcesByType, clock } = require('./soak/tally')
const { SampleLog, MinuteTable, countsObject } = require('./soak/samples')
const { verdict } = require('./soak/verdict')
const { watchWallClock } = require('./soak/wall-clock')

// stdout and stderr are opened lazily: open them first, so they count as there from the start.
void process.stdout
void process.stderr
const resourcesAtStart = resourcesByType()

function parseArgs(argv) {
  const settings = {
    minutes: 30,
    'restart-every': 180,
    processes: 4,
    backends: 'redis,memory',
    'respawn-every': 300,
    actors: 2,
    'stall-every': Infinity,
    'restart-quarantine-ms': 2000,
  }
  for (const arg of argv) {
    const match = /^--([a-z-]+)=(.*)$/.exec(arg)
    if (match?.[1] === 'excuse-restarts' && match[2] === 'yes') {
      settings.excuseRestarts = true
      continue
    }
    if (!match || !(match[1] in settings || match[1] === 'json')) throw new TypeError(`soak: unknown argument ${arg}`)
    settings[match[1]] = match[2]
  }
  const number = (name) => {
    const value = Number(settings[name])
    if (!(value > 0)) throw new TypeError(`soak: --${name} must be a positive number, got ${settings[name]}`)
    return value
  }
  const quarantineMs = Number(settings['restart-quarantine-ms'])
  if (!(Number.isInteger(quarantineMs) && quarantineMs >= 0 && quarantineMs <= 2_147_483_647)) {
    throw new TypeError(`soak: --restart-quarantine-ms must be a whole number of ms from 0, got ${settings['restart-quarantine-ms']}`)
  }
  // The quarantine is what makes an overlap across a restart a broken guarantee: excusing
  // those with it on would hide just what it is there to show.
  if (settings.excuseRestarts && quarantineMs > 0) {
    throw new TypeError(`soak: --excuse-restarts=yes excuses overlaps across restarts, which --restart-quarantine-ms=${quarantineMs} forbids; pass --restart-quarantine-ms=0 with it`)
  }
  const backends = String(settings.backends).split(',')
  for (const b of backends) if (!['redis', 'memory'].includes(b)) throw new TypeError(`soak: --backends takes redis and memory, got ${b}`)
  return {
    runMs: number('minutes') * 60_000,
    restartMs: number('restart-every') * 1000,
    respawnMs: number('respawn-every') * 1000,
    stallMs: number('stall-every') * 1000,
    processes: Math.round(number('processes')),
    actors: Math.round(number('actors')),
    backends,
    json: settings.json,
    excuseRestarts: settings.excuseRestarts === true,
    quarantineMs,
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const sampleMs = Math.min(10_000, args.runMs / 30)
  const lockServer = await startRedis()
  const dataServer = await startRedis()
  const settings = { lockUrl: lockServer.url, dataUrl: dataServer.url, backends: args.backends, actors: args.actors, sampleMs, quarantineMs: args.quarantineMs }
  const started = Date.now()
  const startedClock = clock()
  const wallClock = watchWallClock()
  const processes = []
  const restarts = []
  const restartClocks = []
  const minutes = new MinuteTable(started)
  // Each sample is folded in as it arrives, not kept (scripts/soak/samples.js): kept whole, they
  // grew this process's heap, and its RSS the verdict judges, by some 5 KB each.
  const newEntry = (label, fields) => {
    const log = new SampleLog()
    const entry = { label, log, samples: log.samples, ...fields }
    entry.onSample = (sample) => {
      log.add(sample)
      minutes.add(label, sample)
    }
    return entry
  }

  const spawnChild = () => {
    const entry = newEntry(`child ${processes.length}`, { wholeRun: Date.now() - started < sampleMs })
    const child = fork(path.join(__dirname, 'soak', 'child.js'), [], {
      env: { ...process.env, SOAK_SETTINGS: JSON.stringify(settings) },
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    entry.child = child
    entry.exited = new Promise((resolve) => child.once('exit', resolve))
    child.on('message', (message) => {
      if (message.type === 'sample') entry.onSample(message.sample)
      if (message.type === 'done') {
        entry.result = message.result
        entry.doneAt = performance.now()
      }
    })
    child.once('exit', (code, signal) => {
      if (entry.doneAt !== undefined) entry.exitMs = performance.now() - entry.doneAt
      if (!entry.killed && (code !== 0 || signal)) entry.crashed = `exited with ${signal ?? code}`
    })
    processes.push(entry)
    return entry
  }

  const parent = newEntry('parent', { wholeRun: true })
  processes.push(parent)
  const children = []
  for (let i = 1; i < args.processes; i += 1) children.push(spawnChild())

  let stopParent
  const parentStopped = new Promise((resolve) => (stopParent = resolve))
  const parentRun = runProcess({ ...settings, stopped: parentStopped, onSample: parent.onSample })

  // Restarts of the lock server and respawns of a child, on their own schedules.
  let nextRestart = started + args.restartMs
  let nextRespawn = started + args.respawnMs
  let nextStall = started + args.stallMs
  let nextLine = started + 60_000
  let respawned = 0
  const stalls = []
  while (Date.now() < started + args.runMs) {
    await sleep(Math.max(0, Math.min(nextRestart, nextRespawn, nextStall, nextLine, started + args.runMs) - Date.now()))
    const now = Date.now()
    if (now >= started + args.runMs) break
    if (now >= nextRestart) {
      nextRestart += args.restartMs
      restartClocks.push(clock())
      await lockServer.kill()
      await lockServer.start()
      restarts.push(Math.round((now - started) / 1000))
    }
    if (now >= nextRespawn && children.length) {
      nextRespawn += args.respawnMs
      const victim = children[respawned % children.length]
      victim.killed = true
      process.kill(victim.child.pid, 'SIGKILL')
      await victim.exited
      children[respawned % children.length] = spawnChild()
      respawned += 1
    }
    if (now >= nextStall && children.length) {
      nextStall += args.stallMs
      const victim = children[Math.floor(Math.random() * children.length)]
      const stallMs = 1600 + Math.floor(Math.random() * 800)
      stalls.push({ pid: victim.child.pid, atS: Math.round((now - started) / 1000), ms: stallMs })
      process.kill(victim.child.pid, 'SIGSTOP')
      await sleep(stallMs)
      process.kill(victim.child.pid, 'SIGCONT')
    }
    if (now >= nextLine) {
      nextLine += 60_000
      printLine(Math.round((now - started) / 60_000), processes)
    }
  }

  for (const entry of children) entry.child.send({ type: 'stop' })
  stopParent()
  parent.result = await parentRun
  await Promise.all(children.map((entry) => entry.exited))
  printLine(Math.round((Date.now() - started) / 6000) / 10, processes)

  const data = new Redis(dataServer.url, { maxRetriesPerRequest: 1 })
  const wallSteps = wallClock.stop()
  let sections
  try {
    sections = await checkSections(data, { restarts: restartClocks, excuseRestarts: args.excuseRestarts, wallSteps })
  } finally {
    // A check that fails must still let the process exit: an open connection or a server
    // child would keep it running after the error is printed.
    data.disconnect()
    await lockServer.close()
    await dataServer.close()
  }
  await sleep(100)
  parent.result.resourcesAtStart = resourcesAtStart
  parent.result.resourcesAfterClose = resourcesByType()

  const { failures, rss, native, heap } = verdict({ processes, sections, runMs: args.runMs })
  const summary = {
    command: `npm run soak -- ${process.argv.slice(2).join(' ')}`.trim(),
    minutes: args.runMs / 60_000,
    processes: args.processes,
    backends: args.backends,
    restartQuarantineMs: args.quarantineMs,
    restartsAtS: restarts,
    childrenRespawned: respawned,
    stalls,
    wallClockSteps: wallSteps.map((step) => ({ atS: Math.round((step.at - startedClock) / 100) / 10, ms: Math.round(step.ms * 10) / 10 })),
    sections: {
      total: sections.sections,
      inDoubt: sections.inDoubt,
      counters: sections.counters,
      overlaps: sections.overlaps,
      overlapsAcrossRestarts: sections.overlapsAcrossRestarts,
      failedAcrossRestarts: sections.failedAcrossRestarts,
      expiredAcrossRestarts: sections.expiredAcrossRestarts,
      expiredOverlaps: sections.expiredOverlaps,
      overlapsNearWallSteps: sections.overlapsNearWallSteps,
      expired: sections.expired,
      verdicts: sections.verdicts,
      restartsExcused: args.excuseRestarts,
    },
    rss,
    native,
    heap,
    nativeSamplesMb: Object.fromEntries(processes.map((p) => [p.label, p.samples.map((s) => s.nativeMb)])),
    rssSamplesMb: Object.fromEntries(processes.map((p) => [p.label, p.samples.map((s) => s.rss)])),
    perMinute: minutes.toJSON(),
    exits: processes.filter((p) => p.exitMs !== undefined).map((p) => Math.round(p.exitMs)),
    resources: Object.fromEntries(processes.filter((p) => p.result?.resourcesAtStart).map((p) => [p.label, { atStart: p.result.resourcesAtStart, afterClose: p.result.resourcesAfterClose }])),
    failures,
    passed: failures.length === 0,
  }
  const json = JSON.stringify(summary, null, 2)
  if (args.json) fs.writeFileSync(args.json, `${json}\n`)
  console.log(json)
  console.log(failures.length ? `soak FAILED: ${failures.length} rule(s) broken` : 'soak passed')
  process.exitCode = failures.length ? 1 : 0
}

/** The counts of samples not printed yet, summed over processes, with each one's latest memory. */
function printLine(minute, processes) {
  const counts = { ops: {}, errors: {}, grants: 0, passes: 0, lost: 0 }
  const rss = []
  const native = []
  let heap = 0
  let external = 0
  let arrayBuffers = 0
  const watched = {}
  const stalls = []
  for (const p of processes) {
    const fresh = p.log.takeFresh()
    addCounts(counts, countsObject(fresh.counts))
    if (fresh.pid !== undefined) stalls.push(`${fresh.pid}:${fresh.stallMaxMs}`)
    const last = p.log.last
    if (!last || p.killed) continue
    rss.push(last.rss)
    native.push(last.nativeMb ?? '?')
    heap += last.heapUsed
    external += last.external
    arrayBuffers += last.arrayBuffers
    addCounts(watched, last.watched)
  }
  const ops = Object.values(counts.ops).reduce((a, b) => a + b, 0)
  const parentResources = processes[0].log.last?.resources ?? {}
  console.log(
    `[soak] min ${minute}: rss MB ${rss.join('/')} native MB ${native.join('/')} heap ${heap.toFixed(1)} ext ${external.toFixed(1)} ab ${arrayBuffers.toFixed(1)}` +
      ` | parent handles ${JSON.stringify(parentResources)} | watched ${JSON.stringify(watched)}` +
      ` | ops ${ops} grants ${counts.grants} passes ${counts.passes} lost ${counts.lost} | errors ${JSON.stringify(counts.errors)}` +
      ` | loop stall max ms (pid:ms) ${stalls.join(' ')}`,
  )
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
