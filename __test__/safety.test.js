'use strict'

// Every unsafe block in src/ says why it holds, and all of the binding's unsafe code is in
// src/binding/sys/ (scripts/check-safety.js). The second check must catch an unsafe block
// planted elsewhere, so it is also run on a copy of src/ with one added.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { unjustified, outsideSys } = require('../scripts/check-safety')

const root = path.join(__dirname, '..')

test('every unsafe block in src/ has a SAFETY: comment in the 3 lines above it', () => {
  assert.deepEqual(unjustified(root), [])
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

test('no unsafe code outside src/binding/sys/ but the core\'s pages.rs', () => {
  assert.deepEqual(outsideSys(root), [])
})

test('the check fails on unsafe code planted outside src/binding/sys/', () => {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'nrl-unsafe-'))
  try {
    fs.cpSync(path.join(root, 'src'), path.join(copy, 'src'), { recursive: true })
    const handle = path.join(copy, 'src', 'binding', 'handle.rs')
    const before = fs.readFileSync(handle, 'utf8').split('\n').length
    fs.appendFileSync(
      handle,
      [
        '// SAFETY: justified, and still not allowed here',
        'fn planted() { unsafe { std::hint::unreachable_unchecked() } }',
        'unsafe extern "C" fn planted_callback() {}',
        '',
      ].join('\n'),
    )
    // Unsafe code inside sys/ stays allowed.
    fs.appendFileSync(path.join(copy, 'src', 'binding', 'sys', 'env.rs'), '\n// SAFETY: fine\nunsafe impl Send for X {}\n')
    assert.deepEqual(outsideSys(copy), [
      `src/binding/handle.rs:${before + 1}: fn planted() { unsafe { std::hint::unreachable_unchecked() } }`,
      `src/binding/handle.rs:${before + 2}: unsafe extern "C" fn planted_callback() {}`,
    ])
  } finally {
    fs.rmSync(copy, { recursive: true, force: true })
  }
})
