'use strict'

// The bench scripts load and run (a broken bench shows up here, not at the next bench run):
// paired.js, one short window of ours against raw ioredis (a root devDependency; the peers
// live in bench/node_modules, which a test run does not install), serial and in flight.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const path = require('node:path')

const run = (args) =>
  new Promise((resolve) => {
    execFile(process.execPath, [path.join(__dirname, '..', 'bench', 'paired.js'), ...args], { timeout: 120_000 }, (err, stdout, stderr) =>
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
