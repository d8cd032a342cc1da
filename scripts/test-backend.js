#!/usr/bin/env node
'use strict'

// Runs the tests that hold on every backend (the files that take theirs from
// __test__/helpers/backend.js) once more, on the embedded memory:// backend
// (NRL_BACKEND=memory): `npm test` runs them on a private redis-server first.
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

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
  env: { ...process.env, NRL_BACKEND: 'memory' },
})
process.exit(run.status ?? 1)
