'use strict'

// Every unsafe block in src/ says why it holds (scripts/check-safety.js).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { unjustified } = require('../scripts/check-safety')

test('every unsafe block in src/ has a SAFETY: comment in the 3 lines above it', () => {
  assert.deepEqual(unjustified(path.join(__dirname, '..')), [])
})

test('the check finds an unsafe block without one, and accepts one with one', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'nrl-safety-'))
  try {
    fs.mkdirSync(path.join(root, 'src', 'nested'), { recursive: true })
    const file = path.join(root, 'src', 'nested', 'x.rs')
    fs.writeFileSync(
      file,
      [
        '// SAFETY: too far above to count',
        '',
        '',
        '',
        'fn a() { unsafe { b() } }',
        '// "unsafe {" in a comment, and in a string below, is not a block',
        'const S: &str = "unsafe {";',
        'unsafe fn c() {}',
        '// SAFETY: justified',
        'unsafe impl Send for X {}',
      ].join('\n'),
    )
    assert.deepEqual(unjustified(root), ['src/nested/x.rs:5: fn a() { unsafe { b() } }'])
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
})
