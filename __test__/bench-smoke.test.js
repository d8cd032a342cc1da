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
