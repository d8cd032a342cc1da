'use strict'

// The bench scripts load and run (a broken bench shows up here, not at the next bench run):
// paired.js, one short window of ours against raw ioredis (a root devDependency; the peers
// live in bench/node_modules, which a test run does not install, and the run hides them even
// where they are installed), serial and in flight.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const path = require('node:path')

const run = (args) =>
  new Promise((resolve) => {
    execFile(process.execPath, ['-r', path.join(__dirname, 'helpers', 'without-bench-peers.js'), path.join(__dirname, '..', 'bench', 'paired.js'), ...args], { timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }),
    )
  })

for (const mode of [[], ['--inflight=8']]) {
  test(`bench/paired.js runs ${mode.length ? 'in flight' : 'serially'}`, async () => {
    const { code, stdout, stderr } = await run(['ours-distributed-lock', 'ioredis-raw', '--windows=1', '--ms=50', ...mode])
    assert.equal(code, 0, stderr)
    assert.match(stdout, /median \d+\.\d+×/)
    assert.match(stdout, /Node CPU [\d.]+ µs, Redis CPU [\d.]+ µs/)
  })
}

// `--help` prints the usage and exits at once: it must never start a run of an hour, nor a
// redis-server (which a run starts first). A mistyped option is refused the same way.
const runJs = (args) =>
  new Promise((resolve) => {
    execFile(process.execPath, ['-r', path.join(__dirname, 'helpers', 'without-bench-peers.js'), path.join(__dirname, '..', 'bench', 'run.js'), ...args], { timeout: 20_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }),
    )
  })

test('bench/run.js --help prints scenarios, adapters and flags, and exits 0', async () => {
  for (const flag of ['--help', '-h']) {
    const { code, stdout, stderr } = await runJs([flag])
    assert.equal(code, 0, stderr)
    assert.match(stdout, /^usage: npm run bench/)
    for (const option of ['--quick', '--only=', '--placements=', '--adapters=', '--merge', '--report-only']) assert.ok(stdout.includes(option), option)
    for (const scenario of ['a', 'b', 'c', 'c4', 'd', 'e', 'f', 'ra', 'rb', 'rc']) assert.match(stdout, new RegExp(`^  ${scenario} +\\S`, 'm'))
    assert.match(stdout, /^ {2}ours-distributed-lock-nostats\b/m)
    assert.doesNotMatch(stderr, /redis-server pid/)
  }
})

test('bench/run.js refuses an unknown option or scenario with exit code 2, before any run', async () => {
  for (const [args, said] of [[['--hepl'], /unknown option --hepl/], [['--only=a,zz'], /unknown scenario zz/]]) {
    const { code, stdout, stderr } = await runJs(args)
    assert.equal(code, 2)
    assert.match(stderr, said)
    assert.equal(stdout, '')
    assert.doesNotMatch(stderr, /redis-server pid/)
  }
})

// A ratio of two rows measured in different runs (a `--merge --adapters=...` re-measured one
// side) is shown, but decides no target: such a pair once read 0.56x where one run read 0.93x.
test('bench report: a comparison of rows from two runs decides no target', () => {
  const fs = require('node:fs')
  const os = require('node:os')
  const { writeReport } = require('../bench/lib/report')
  const rounds = (rate) => Array.from({ length: 3 }, () => ({ rate }))
  const adapters = {
    'ours-distributed-lock': { name: 'ours: DistributedLock', kind: 'ours' },
    'ours-distributed-lock-wait': { name: 'ours: DistributedLock.waitForLock', kind: 'ours' },
    'ours-exclusive-lock': { name: 'ours: ExclusiveLock', kind: 'ours' },
    'original-exclusive-lock': { name: 'original: @logdna/exclusive-lock (stand-in)', kind: 'original' },
  }
  const results = (remeasured) => ({
    meta: { command: 'npm run bench', date: 'first', seconds: 1, cpu: 'x', kernel: 'y', node: 'z', versions: {}, params: { rounds: 1, roundMs: 1, warmupMs: 1 }, adapters, remeasured },
    placements: {
      unpinned: {
        b: {
          'ours-distributed-lock': { rounds: rounds(100) },
          'ours-distributed-lock-wait': { rounds: rounds(56) },
          // Stamped by the run that measured it (bench/lib/runs.js), whatever meta says.
          'ours-exclusive-lock': { rounds: rounds(50), run: 'later' },
          'original-exclusive-lock': { rounds: rounds(40), run: 'first' },
        },
      },
    },
  })
  const row = (text, label) => text.split('\n').find((line) => line.startsWith(`| ${label}`) && line.includes('(b)'))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-report-'))
  try {
    const wait = 'DistributedLock.waitForLock (free key)'
    const exclusive = 'ExclusiveLock ÷ original'
    // One run: decided.
    const one = writeReport(results(undefined), dir)
    assert.match(row(one, wait), /\| 0\.56× \| 0\.56× \| >= 0\.9× \| \*\*no\*\* \|$/)
    // acquire re-measured later, waitForLock not: shown, not decided.
    const merged = writeReport(results([{ command: 'npm run bench -- --merge', date: 'later', seconds: 1, scenarios: ['b'], placements: ['unpinned'], adapters: ['ours-distributed-lock'] }]), dir)
    assert.match(row(merged, wait), /\| 0\.56×, rows of different runs \| n\/a \| >= 0\.9× \| n\/a \|$/)
    assert.match(row(merged, exclusive), /\| 1\.25×, rows of different runs \| n\/a \| >= 1\.0× \| n\/a \|$/)
    // Both re-measured by one merge: decided again.
    const both = writeReport(results([{ command: 'npm run bench -- --merge', date: 'later', seconds: 1, scenarios: ['b'], placements: ['unpinned'], adapters: null }]), dir)
    assert.match(row(both, wait), /\*\*no\*\* \|$/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
