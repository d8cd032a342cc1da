'use strict'

// Every `unsafe` block (and `unsafe impl`) under src/ says why it holds: a `SAFETY:` comment
// on one of the 3 lines above it (or on its own line). Run by __test__/safety.test.js; exits
// 1 listing the blocks without one. `unsafe fn` and `unsafe extern` are declarations, whose
// contract is in their `# Safety` doc, not blocks.
const fs = require('node:fs')
const path = require('node:path')

const ABOVE = 3
// `unsafe {` or `unsafe impl` outside a comment or a string; `unsafe fn`, `unsafe extern`
// and the `unsafe_op_in_unsafe_fn` lint's name are not matched.
const UNSAFE = /\bunsafe\s*(\{|impl\b)/

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

module.exports = { unjustified }

if (require.main === module) {
  const found = unjustified(path.join(__dirname, '..'))
  if (found.length > 0) {
    console.error(`unsafe without a SAFETY: comment in the ${ABOVE} lines above:\n${found.join('\n')}`)
    process.exit(1)
  }
}
