#!/usr/bin/env node
'use strict'

// Checks that ARCHITECTURE.md's "To change X, open Y" table and its glossary can be followed:
// every file or folder they name exists (relative to src/core, src or the repository; `{a,b}`
// and `*` expand to at least one file), and every name given right after a file, as in
// `ops/acquire.rs` (`Plan`, `Locker::place`) or `backend/link.rs` `call`, is defined in that
// file (a Rust item, field or variant; a word of a JS or Lua file). Other backticked names
// that look like Rust types must still be found somewhere in src/, lib/ or the typings. Run
// with no arguments to check this repository (exit code 1 and a list of problems when it
// breaks), or `require` it.

const fs = require('node:fs')
const path = require('node:path')

const TABLES = ['## To change X, open Y', '## Glossary']
const FILE = /\.(rs|js|lua|ts|md|json)$/
const NAME = /^[A-Za-z_]\w*(::\w+)*(\(\))?$/

/** The rows of the first table after `heading`, as arrays of cells (header rows left out). */
function rows(doc, heading) {
  const at = doc.indexOf(`\n${heading}\n`)
  if (at < 0) return null
  const lines = doc.slice(at + heading.length + 2).split('\n')
  const start = lines.findIndex((line) => line.startsWith('|'))
  const out = []
  for (const line of lines.slice(start)) {
    if (!line.startsWith('|')) break
    out.push(line.split('|').slice(1, -1).map((cell) => cell.trim()))
  }
  return out.slice(2)
}

/** `a/{b,c}.rs` -> ['a/b.rs', 'a/c.rs']. */
function braces(p) {
  const m = /\{([^}]*)\}/.exec(p)
  if (!m) return [p]
  return m[1].split(',').flatMap((part) => braces(p.slice(0, m.index) + part + p.slice(m.index + m[0].length)))
}

/** The files (or folders) `p` names, looked for under src/core, src and the root. */
function resolve(root, p) {
  for (const base of ['src/core', 'src', '.']) {
    const found = braces(p).flatMap((one) => {
      const full = path.join(root, base, one)
      if (!one.includes('*')) return fs.existsSync(full) ? [full] : []
      const dir = path.dirname(full)
      if (!fs.existsSync(dir)) return []
      const glob = new RegExp(`^${path.basename(one).replace(/[.]/g, '\\.').replace(/\*/g, '.*')}$`)
      return fs.readdirSync(dir).filter((f) => glob.test(f)).map((f) => path.join(dir, f))
    })
    // Every alternative of a brace must exist: one missing is a name gone.
    const wanted = braces(p).length
    if (found.length >= wanted || (p.includes('*') && found.length > 0)) return found
  }
  return []
}

function filesUnder(full) {
  if (!fs.statSync(full).isDirectory()) return [full]
  return fs.readdirSync(full, { withFileTypes: true }).flatMap((e) => filesUnder(path.join(full, e.name)))
}

/** Code without comments: a name only mentioned in a comment is not defined there. */
function code(file) {
  const text = fs.readFileSync(file, 'utf8')
  if (file.endsWith('.rs') || file.endsWith('.js') || file.endsWith('.ts')) {
    return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/[^\n]*/g, '$1')
  }
  if (file.endsWith('.lua')) return text.replace(/--[^\n]*/g, '')
  return text
}

/** Whether `name` (its last segment; the others must appear) is defined in `file`. */
function definedIn(file, name) {
  const segs = name.replace(/\(\)$/, '').split('::')
  const last = segs.pop()
  const text = code(file)
  const word = (w) => new RegExp(`\\b${w}\\b`).test(text)
  if (!segs.every(word)) return false
  if (!file.endsWith('.rs')) return word(last)
  return [
    new RegExp(`\\b(fn|struct|enum|union|trait|type|const|static|mod)\\s+${last}\\b`),
    new RegExp(`macro_rules!\\s*${last}\\b`),
    // A field, or an enum's variant.
    new RegExp(`^\\s*(pub(\\([^)]*\\))?\\s+)?${last}\\s*:[^:]`, 'm'),
    new RegExp(`^\\s*${last}\\s*(\\{|\\(|,|$)`, 'm'),
  ].some((re) => re.test(text))
}

/**
 * The backticked words of `cell`, each a file (with the names attached to it) or a name on
 * its own. A name is attached when it follows its file directly, or in the parenthesis
 * opened right after it, joined to the one before it by a comma, a slash or a space.
 */
function parse(cell) {
  const items = []
  const token = /`([^`]+)`/g
  let m
  let last = null // the item the previous token was attached to
  let end = 0
  while ((m = token.exec(cell))) {
    const between = cell.slice(end, m.index)
    const word = m[1]
    end = m.index + m[0].length
    if (!word.includes('://') && (FILE.test(word) || word.endsWith('/'))) {
      last = { file: word, names: [] }
      items.push(last)
      continue
    }
    if (!NAME.test(word)) {
      last = null
      continue
    }
    const first = last && last.names.length === 0 && /^\s*\(?\s*$/.test(between)
    const chained = last && last.names.length > 0 && /^\s*[,/]?\s*$/.test(between)
    if (first || chained) last.names.push(word)
    else {
      items.push({ name: word })
      last = null
    }
  }
  return items
}

/** Every word defined or used in the sources, for names given without a file. */
function corpus(root) {
  const files = []
  for (const dir of ['src', 'lib']) files.push(...filesUnder(path.join(root, dir)))
  for (const f of fs.readdirSync(root)) if (f.endsWith('.d.ts')) files.push(path.join(root, f))
  const words = new Set()
  for (const file of files) for (const w of code(file).match(/\w+/g) || []) words.add(w)
  return words
}

function check(root, doc = fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8')) {
  const problems = []
  let words = null
  for (const heading of TABLES) {
    const table = rows(doc, heading)
    if (!table) {
      problems.push(`ARCHITECTURE.md has no table under "${heading}"`)
      continue
    }
    for (const row of table) {
      const label = row[0]
      for (const item of parse(row.slice(1).join(' | '))) {
        if (item.name) {
          // ALL_CAPS words are settings and constants of other languages (DEBUG).
          if (!/^[A-Z][a-z]\w*(::\w+)*$/.test(item.name)) continue
          words = words || corpus(root)
          const missing = item.name.split('::').filter((w) => !words.has(w))
          if (missing.length) problems.push(`${label}: \`${item.name}\` is found nowhere in src/, lib/ or the typings`)
          continue
        }
        const files = resolve(root, item.file)
        if (files.length === 0) {
          problems.push(`${label}: \`${item.file}\` does not exist`)
          continue
        }
        const all = files.flatMap(filesUnder)
        for (const name of item.names) {
          if (!all.some((file) => definedIn(file, name))) {
            problems.push(`${label}: \`${name}\` is not defined in \`${item.file}\``)
          }
        }
      }
    }
  }
  return { problems }
}

/** The files a row names (braces and globs expanded), for its size. */
function filesOfRow(root, label, doc = fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8')) {
  const row = rows(doc, TABLES[0]).find((cells) => cells[0] === label)
  if (!row) return null
  const files = new Set()
  for (const item of parse(row.slice(1).join(' | '))) {
    if (item.file) for (const f of resolve(root, item.file)) files.add(path.relative(root, f))
  }
  return [...files]
}

module.exports = { check, filesOfRow, parse }

if (require.main === module) {
  const root = path.join(__dirname, '..')
  const { problems } = check(root)
  if (problems.length) {
    for (const p of problems) console.error(p)
    process.exit(1)
  }
  console.log('ARCHITECTURE.md: every file and name of its "To change" table and glossary exists')
}
