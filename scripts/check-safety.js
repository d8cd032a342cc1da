'use strict'

// Two checks, run by __test__/safety.test.js; exits 1 listing what fails either:
// - every `unsafe` block (and `unsafe impl`) under src/ says why it holds: a `SAFETY:`
//   comment on one of the 3 lines above it (or on its own line). `unsafe fn` and
//   `unsafe extern` are declarations, whose contract is in their `# Safety` doc, not blocks;
// - no `unsafe` of any kind, nor `extern "C"`, outside src/binding/sys/ (the binding's one
//   module of raw Node-API and libuv, behind safe wrappers) and `ALLOWED_OUTSIDE`.
const fs = require('node:fs')
const path = require('node:path')

const ABOVE = 3
// `unsafe {` or `unsafe impl` outside a comment or a string; `unsafe fn`, `unsafe extern`
// and the `unsafe_op_in_unsafe_fn` lint's name are not matched.
const UNSAFE = /\bunsafe\s*(\{|impl\b)/
// Any `unsafe` (block, impl, fn, trait, extern) or an `extern "C"` ABI (whose string the
// code has emptied); the lint's name `unsafe_op_in_unsafe_fn` is one word, not matched.
const RAW = /\bunsafe\b|\bextern\s*""/
const SYS = 'src/binding/sys/'
// The core's mmap-backed vector: the one unsafe code outside the binding's sys module.
const ALLOWED_OUTSIDE = ['src/core/basics/pages.rs']

function rustFiles(dir) {
  const files = []
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) files.push(...rustFiles(full))
    else if (entry.name.endsWith('.rs')) files.push(full)
  }
  return files
}

/** The code of a line: without its `//` comment and the contents of its string literals. */
function code(line) {
  return line.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\/\/.*$/, '')
}

function unjustified(root) {
  const found = []
  for (const file of rustFiles(path.join(root, 'src'))) {
    const lines = fs.readFileSync(file, 'utf8').split('\n')
    lines.forEach((line, i) => {
      if (!UNSAFE.test(code(line))) return
      const window = lines.slice(Math.max(0, i - ABOVE), i + 1)
      if (!window.some((l) => l.includes('SAFETY:'))) {
        found.push(`${path.relative(root, file).split(path.sep).join('/')}:${i + 1}: ${line.trim()}`)
      }
    })
  }
  return found
}

/** `file:line: text` of every unsafe or `extern "C"` outside src/binding/sys/ and the exceptions. */
function outsideSys(root) {
  const found = []
  for (const file of rustFiles(path.join(root, 'src'))) {
    const rel = path.relative(root, file).split(path.sep).join('/')
    if (rel.startsWith(SYS) || ALLOWED_OUTSIDE.includes(rel)) continue
    fs.readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (RAW.test(code(line))) found.push(`${rel}:${i + 1}: ${line.trim()}`)
      })
  }
  return found
}

module.exports = { unjustified, outsideSys }

if (require.main === module) {
  const root = path.join(__dirname, '..')
  const found = unjustified(root)
  if (found.length > 0) {
    console.error(`unsafe without a SAFETY: comment in the ${ABOVE} lines above:\n${found.join('\n')}`)
  }
  const outside = outsideSys(root)
  if (outside.length > 0) {
    console.error(`unsafe outside ${SYS} (and ${ALLOWED_OUTSIDE.join(', ')}):\n${outside.join('\n')}`)
  }
  if (found.length > 0 || outside.length > 0) process.exit(1)
}
