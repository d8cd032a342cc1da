'use strict'

// The core's layers (ARCHITECTURE.md) hold: no JavaScript in src/core, no import cycle, and
// no layer importing one above it. The checker must catch an upward import, so it is also
// run on a copy of the core with one added.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { check } = require('../scripts/check-layers')

const root = path.join(__dirname, '..')

test('src/core keeps its layers and has no import cycle', () => {
  const { problems } = check(root)
  assert.deepEqual(problems, [])
})

test('the check fails when a class of the binding reaches past the fronts', () => {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'))
  try {
    fs.cpSync(path.join(root, 'src'), path.join(copy, 'src'), { recursive: true })
    fs.appendFileSync(path.join(copy, 'src', 'binding', 'lock_service.rs'), '\nuse crate::core::ops::lock::Locker;\n')
    const { problems } = check(copy)
    assert.deepEqual(problems, ['src/binding/lock_service.rs reaches core::ops (only front, basics)'])
  } finally {
    fs.rmSync(copy, { recursive: true, force: true })
  }
})

test('the check fails on an upward import, a cycle and a binding import', () => {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'))
  try {
    fs.cpSync(path.join(root, 'src', 'core'), path.join(copy, 'src', 'core'), { recursive: true })
    const keys = path.join(copy, 'src', 'core', 'basics', 'keys.rs')
    fs.appendFileSync(keys, '\nuse crate::core::ops::lock::Locker;\nuse crate::binding::handle;\n')
    const { problems } = check(copy)
    assert.ok(problems.some((p) => p === 'upward import: basics::keys uses ops::lock'), problems.join('\n'))
    assert.ok(problems.some((p) => p.startsWith('import cycle:') && p.includes('basics::keys')), problems.join('\n'))
    assert.ok(problems.some((p) => p.includes('keys.rs mentions') && p.includes('crate::binding')), problems.join('\n'))
  } finally {
    fs.rmSync(copy, { recursive: true, force: true })
  }
})
