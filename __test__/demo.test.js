'use strict'

// The README's first command: `npm run demo` runs the contention demo on the embedded
// backend when no Redis is given (here with no redis-server on the PATH at all), and over
// a private redis-server with `--redis`. Both must keep every section exclusive.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFile } = require('node:child_process')

const DEMO = path.join(__dirname, '..', 'demo', 'contend.js')

function demo(args, env) {
  return new Promise((resolve) => {
    execFile(process.execPath, [DEMO, ...args], { env: { ...env, WORKERS: '3', DURATION_MS: '600' }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }),
    )
  })
}

function figures(stdout) {
  const number = (label) => Number(new RegExp(`${label}\\s+(\\d+)`).exec(stdout)?.[1])
  return { sections: number('sections'), violations: number('violations'), lost: number('lost updates') }
}

test('with no Redis given, worker threads contend on memory://, and say so', async () => {
  // No redis-server can be found: only node's own directory is on the PATH.
  const env = { PATH: path.dirname(process.execPath), HOME: process.env.HOME }
  const { code, stdout, stderr } = await demo([], env)
  assert.equal(code, 0, stderr)
  assert.match(stdout, /worker threads, .*embedded backend memory:\/\/demo/)
  const { sections, violations, lost } = figures(stdout)
  assert.ok(sections > 10, stdout)
  assert.equal(violations, 0)
  assert.equal(lost, 0)
  assert.match(stdout, /fences in order\s+yes/)
})

test('--redis runs worker processes over a private redis-server', async () => {
  const env = { ...process.env }
  delete env.REDIS_URL
  const { code, stdout, stderr } = await demo(['--redis'], env)
  assert.equal(code, 0, stderr)
  assert.match(stdout, /worker processes, .*private Redis on port \d+/)
  const { sections, violations, lost } = figures(stdout)
  assert.ok(sections > 10, stdout)
  assert.equal(violations, 0)
  assert.equal(lost, 0)
})
