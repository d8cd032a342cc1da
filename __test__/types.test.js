'use strict'

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const root = path.join(__dirname, '..')

test('index.d.ts type-checks a usage file under tsc --noEmit --strict', () => {
  const tsc = require.resolve('typescript/bin/tsc')
  let output = ''
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types'), '--noEmit', '--strict'], {
      cwd: root,
      encoding: 'utf8',
    })
  } catch (err) {
    output = `${err.stdout}${err.stderr}`
  }
  assert.equal(output, '', output)
})

test('public signatures contain no `any`', () => {
  const fs = require('node:fs')
  for (const file of ['index.d.ts', 'distributed-lock.d.ts']) {
    const text = fs.readFileSync(path.join(root, file), 'utf8')
    assert.doesNotMatch(text, /\bany\b/, file)
  }
})
