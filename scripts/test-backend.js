#!/usr/bin/env node
'use strict'

// Runs the tests that hold on every backend (the files that take theirs from
// __test__/helpers/backend.js) once more, on the backend named by the one argument (its
// NRL_BACKEND): `memory`, the embedded memory:// backend, or `redis-resp2`, a private
// redis-server without HELLO (RESP2 only, so waiters poll, and fair queues and handovers must
// hold without wake-up messages). `npm test` runs them on a plain redis-server first.
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const backend = process.argv[2]
if (!['memory', 'redis-resp2'].includes(backend)) {
  console.error(`usage: node scripts/test-backend.js memory|redis-resp2 (got ${JSON.stringify(backend)})`)
  process.exit(1)
}
const dir = path.join(__dirname, '..', '__test__')
const files = fs
  .readdirSync(dir)
  .filter((name) => name.endsWith('.test.js'))
  .filter((name) => fs.readFileSync(path.join(dir, name), 'utf8').includes("require('./helpers/backend')"))
  .sort()
  .map((name) => path.join('__test__', name))
if (files.length === 0) {
  console.error('no test file takes its backend from __test__/helpers/backend.js')
  process.exit(1)
}
const args = ['--test', '--test-concurrency=1', '--test-timeout=600000', '--test-force-exit', ...files]
const run = spawnSync(process.execPath, args, {
  cwd: path.join(__dirname, '..'),
  stdio: 'inherit',
  env: { ...process.env, NRL_BACKEND: backend },
})
process.exit(run.status ?? 1)
