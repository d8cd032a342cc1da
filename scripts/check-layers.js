#!/usr/bin/env node
'use strict'

// Checks that src/core keeps its layers (see ARCHITECTURE.md): nothing of JavaScript in the
// core, no import cycle between its modules, and every layer importing only itself and the
// layers below it. A module is a file, or a directory's mod.rs; a `#[path = "x_tests.rs"]`
// file belongs to the module that declares it, so the core's tests and their support
// (ops/test_support.rs, a module of ops) are held to the same rules. In src/binding: no
// import cycle, the JS-thread runtime (js/) in its order, and every file reaching the core
// only through its fronts, basics and api. In tests/: the core reached only through api and
// basics, so its inside can change with no test to rewrite. Run with no arguments to check
// this repository (exit code 1 and a list of problems when it breaks), or `require` it.

const fs = require('node:fs')
const path = require('node:path')

/** Bottom to top: a layer may import only itself and the ones before it. */
const LAYERS = ['basics', 'proto', 'backend', 'wait', 'ops', 'front', 'api']
/**
 * Every file of the binding only converts: it reaches the core through its fronts, its
 * basics (errors, tokens) and `api` (the few values that cross), never the operations,
 * waits or backends below.
 */
const BINDING_REACHES = ['front', 'basics', 'api']
/**
 * The JS-thread runtime (src/binding/js), bottom to top: a file uses only the ones before it
 * (and its own folder), and outside js/ only JS_BELOW.
 */
const JS_ORDER = ['outcome', 'in_call', 'thread', 'settle', 'socket', 'responder', 'teardown', 'completions']
const JS_BELOW = ['sys', 'error', 'runtime']
/** What the Rust integration tests (tests/) may use of the core: its inside can then change. */
const TESTS_REACH = ['api', 'basics']
/** What would tie the core to Node: N-API, libuv, or the binding above it. */
const FORBIDDEN = [/napi/i, /libuv/i, /\buv_/, /crate::binding/]

function rustFiles(dir) {
  const out = []
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) out.push(...rustFiles(full))
    else if (entry.name.endsWith('.rs')) out.push(full)
  }
  return out.sort()
}

/** `ops/lock.rs` -> ['ops', 'lock']; `ops/scripts/mod.rs` -> ['ops', 'scripts']. */
function moduleOf(coreDir, file) {
  const parts = path.relative(coreDir, file).split(path.sep)
  const last = parts.pop()
  if (last !== 'mod.rs') parts.push(last.replace(/\.rs$/, ''))
  return parts
}

/**
 * Code without comments, string or char literals, so braces and words in them don't count;
 * their line breaks stay, so a line number in it is the file's. Read in one pass from the
 * start, as rustc reads it: whichever opens first (a comment, a string, a char) holds until
 * it closes, so a quote in a comment, a `//` in a string or a `'"'` cannot throw the rest of
 * the file out of step (a lone `"` in a comment once turned the comments after it into code).
 */
function stripped(text) {
  const breaks = (from, to) => text.slice(from, to).replace(/[^\n]/g, '')
  let out = ''
  let kept = 0 // text before this is already in `out`
  let i = 0
  const skip = (from, to, put) => {
    out += text.slice(kept, from) + put
    kept = i = to
  }
  while (i < text.length) {
    const ch = text[i]
    const next = text[i + 1]
    if (ch === '/' && next === '/') {
      const end = text.indexOf('\n', i)
      skip(i, end < 0 ? text.length : end, '')
    } else if (ch === '/' && next === '*') {
      const end = blockCommentEnd(text, i)
      skip(i, end, breaks(i, end))
    } else if (ch === '"') {
      const end = stringEnd(text, i + 1)
      skip(i, end, `""${breaks(i, end)}`)
    } else if (ch === 'r' && !identifierBefore(text, i) && rawOpening(text, i) !== null) {
      const hashes = rawOpening(text, i)
      const close = text.indexOf(`"${hashes}`, i + hashes.length + 2)
      const end = close < 0 ? text.length : close + hashes.length + 1
      skip(i, end, `""${breaks(i, end)}`)
    } else if (ch === "'") {
      const end = charEnd(text, i)
      if (end > 0) skip(i, end, "' '")
      else i++
    } else {
      i++
    }
  }
  return out + text.slice(kept)
}

/** The `#`s of the raw string `r#"` opened at `at`, or null when none opens there. */
function rawOpening(text, at) {
  const raw = /r(#*)"/y
  raw.lastIndex = at
  return raw.exec(text)?.[1] ?? null
}

/** Whether the `r` at `at` ends an identifier (`for`) rather than opening a raw string (`br"`). */
function identifierBefore(text, at) {
  let from = at
  if (/[bc]/.test(text[from - 1] ?? '')) from--
  return /[\w]/.test(text[from - 1] ?? '')
}

/** Where the block comment opened at `at` ends, past its `*\/`; block comments nest. */
function blockCommentEnd(text, at) {
  let depth = 0
  let i = at
  while (i < text.length) {
    if (text[i] === '/' && text[i + 1] === '*') {
      depth++
      i += 2
    } else if (text[i] === '*' && text[i + 1] === '/') {
      depth--
      i += 2
      if (depth === 0) return i
    } else {
      i++
    }
  }
  return text.length
}

/** Where the string whose text starts at `from` ends, past its closing quote. */
function stringEnd(text, from) {
  let i = from
  while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1
  return Math.min(i + 1, text.length)
}

/**
 * Where the char literal opened by the quote at `at` ends, past its closing quote; 0 for a
 * lifetime or label (`'a`, `'static`), which has no closing quote after one character.
 */
function charEnd(text, at) {
  if (text[at + 1] === '\\') {
    const close = text.indexOf("'", at + 3)
    return close < 0 || text.slice(at, close).includes('\n') ? 0 : close + 1
  }
  const [one] = text.slice(at + 1, at + 3).match(/^[\s\S]/u) ?? ['']
  const after = at + 1 + one.length
  return one !== '' && one !== '\n' && text[after] === "'" ? after + 1 : 0
}

/** `a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']. */
function expandUse(tree) {
  tree = tree.replace(/\s+as\s+\w+/g, '').replace(/\s+/g, '')
  const open = tree.indexOf('{')
  if (open < 0) return [tree.replace(/\bas\w+$/, '')]
  const prefix = tree.slice(0, open)
  const inner = tree.slice(open + 1, tree.lastIndexOf('}'))
  const items = []
  let depth = 0
  let start = 0
  for (let i = 0; i <= inner.length; i++) {
    const ch = inner[i]
    if (ch === '{') depth++
    else if (ch === '}') depth--
    else if ((ch === ',' || i === inner.length) && depth === 0) {
      if (i > start) items.push(inner.slice(start, i))
      start = i + 1
    }
  }
  return items.flatMap((item) => expandUse(prefix + item))
}

/**
 * Every path a file names (`use` trees expanded, and `crate::core::`, `super::`, `self::`
 * paths in code), each with the inline module depth it appears at (`mod tests { .. }`
 * shifts what `super` means).
 */
function pathsIn(code) {
  const found = []
  const inline = [] // brace depths at which inline `mod x {` blocks opened
  let depth = 0
  const token = /\bmod\s+\w+\s*\{|\buse\s+([^;]+);|\b((?:crate::(?:core|binding)|super|self)(?:::(?:super|\w+))+)|[{}]/g
  let m
  while ((m = token.exec(code))) {
    const text = m[0]
    if (text === '{') depth++
    else if (text === '}') {
      depth--
      if (inline.length && inline[inline.length - 1] === depth) inline.pop()
    } else if (text.startsWith('mod')) {
      inline.push(depth)
      depth++
    } else if (m[1] !== undefined) {
      for (const p of expandUse(m[1])) found.push({ path: p, nesting: inline.length })
    } else {
      found.push({ path: m[2], nesting: inline.length })
    }
  }
  return found
}

/** The module a path names, as the longest known module prefix; `null` outside `top`. */
function resolve(from, nesting, raw, known, top) {
  let segs = raw.split('::').filter(Boolean)
  let base
  if (segs[0] === 'crate') {
    if (segs[1] !== top) return null
    base = []
    segs = segs.slice(2)
  } else if (segs[0] === 'super' || segs[0] === 'self') {
    // Inside an inline module, `self` is that module and `super` the file's module.
    base = [...from, ...Array(nesting).fill('<inline>')]
    while (segs[0] === 'super' || segs[0] === 'self') {
      if (segs.shift() === 'super') base = base.slice(0, -1)
    }
    base = base.filter((s) => s !== '<inline>')
  } else {
    return null
  }
  const full = [...base, ...segs]
  for (let n = full.length; n >= 0; n--) {
    const name = full.slice(0, n).join('::')
    if (known.has(name)) return name
  }
  return null
}

/**
 * The modules of `src/<top>` and who imports whom. Files pulled in with #[path] belong to the
 * module declaring them; a directory's mod.rs declaring its children is containment, not a
 * dependency.
 */
function graph(root, top) {
  const dir = path.join(root, 'src', top)
  const files = rustFiles(dir)
  const texts = new Map(files.map((file) => [file, fs.readFileSync(file, 'utf8')]))
  const owner = new Map() // file -> module name
  for (const file of files) owner.set(file, moduleOf(dir, file).join('::'))
  for (const file of files) {
    for (const m of texts.get(file).matchAll(/#\[path\s*=\s*"([^"]+)"\]/g)) {
      const target = path.join(path.dirname(file), m[1])
      if (owner.has(target)) owner.set(target, owner.get(file))
    }
  }
  const known = new Set(owner.values())
  const edges = new Map([...known].map((m) => [m, new Set()]))
  for (const file of files) {
    const from = owner.get(file)
    // A #[path] file is a child of the declaring module: `super` there is that module.
    const here = from.split('::').filter(Boolean)
    const self = owner.get(file) === moduleOf(dir, file).join('::') ? here : [...here, 'tests']
    for (const { path: p, nesting } of pathsIn(stripped(texts.get(file)))) {
      const to = resolve(self, nesting, p, known, top)
      if (to === null || to === from) continue
      if (to.startsWith(from === '' ? '' : `${from}::`)) continue
      edges.get(from).add(to)
    }
  }
  return { files, texts, edges }
}

function check(root) {
  const problems = []
  const { files, texts, edges } = graph(root, 'core')
  for (const file of files) {
    const rel = path.relative(root, file)
    for (const word of FORBIDDEN) {
      if (word.test(texts.get(file))) problems.push(`${rel} mentions ${word}`)
    }
  }
  const layer = (m) => LAYERS.indexOf(m.split('::')[0])
  for (const [from, tos] of edges) {
    if (from === '') continue
    if (layer(from) < 0) problems.push(`src/core/${from.replace(/::/g, '/')} is in no layer (${LAYERS.join(', ')})`)
    for (const to of tos) {
      if (to === '' || layer(to) < 0) continue
      if (layer(to) > layer(from)) problems.push(`upward import: ${from} uses ${to}`)
    }
  }
  for (const cycle of cycles(edges)) problems.push(`import cycle: ${cycle.join(' -> ')}`)
  const binding = checkBinding(root)
  return { problems: [...problems, ...binding.problems, ...checkTests(root)], edges, bindingEdges: binding.edges }
}

/** tests/: the core reached only through TESTS_REACH, each path naming its module. */
function checkTests(root) {
  const problems = []
  const dir = path.join(root, 'tests')
  if (!fs.existsSync(dir)) return problems
  for (const file of rustFiles(dir)) {
    const rel = path.relative(root, file).split(path.sep).join('/')
    for (const [, module] of stripped(fs.readFileSync(file, 'utf8')).matchAll(/native_redis_lock::core::(\w+|\{)/g)) {
      const problem = !TESTS_REACH.includes(module) && `${rel} reaches core::${module} (only ${TESTS_REACH.join(', ')})`
      if (problem && !problems.includes(problem)) problems.push(problem)
    }
  }
  return problems
}

/** src/binding: no cycle, js/ in its order, and the core reached only through BINDING_REACHES. */
function checkBinding(root) {
  const problems = []
  if (!fs.existsSync(path.join(root, 'src', 'binding'))) return { problems, edges: new Map() }
  const { files, texts, edges } = graph(root, 'binding')
  for (const file of files) {
    const rel = path.relative(root, file)
    for (const { path: p } of pathsIn(stripped(texts.get(file)))) {
      const m = /^crate::core::(\w+)/.exec(p)
      const problem = m && !BINDING_REACHES.includes(m[1]) && `${rel} reaches core::${m[1]} (only ${BINDING_REACHES.join(', ')})`
      if (problem && !problems.includes(problem)) problems.push(problem)
    }
  }
  const inJs = (m) => m === 'js' || m.startsWith('js::')
  // The folder's mod.rs is above every file in it.
  const place = (m) => (m === 'js' ? JS_ORDER.length : JS_ORDER.indexOf(m.split('::')[1]))
  for (const [from, tos] of edges) {
    if (!inJs(from)) continue
    if (place(from) < 0) problems.push(`src/binding/${from.replace(/::/g, '/')} has no place in the js/ order (${JS_ORDER.join(', ')})`)
    for (const to of tos) {
      if (!inJs(to)) {
        if (!JS_BELOW.includes(to.split('::')[0])) problems.push(`js/ reaches past what is below it: ${from} uses ${to} (only ${JS_BELOW.join(', ')})`)
      } else if (place(from) >= 0 && place(to) > place(from)) {
        problems.push(`js/ out of order: ${from} uses ${to} (${JS_ORDER.join(' < ')})`)
      }
    }
  }
  for (const cycle of cycles(edges)) problems.push(`binding import cycle: ${cycle.join(' -> ')}`)
  return { problems, edges }
}

/** One cycle per strongly connected component of more than one module (Tarjan). */
function cycles(edges) {
  let index = 0
  const stack = []
  const info = new Map()
  const found = []
  function visit(v) {
    info.set(v, { index, low: index, on: true })
    index++
    stack.push(v)
    for (const w of edges.get(v) || []) {
      if (!info.has(w)) {
        visit(w)
        info.get(v).low = Math.min(info.get(v).low, info.get(w).low)
      } else if (info.get(w).on) {
        info.get(v).low = Math.min(info.get(v).low, info.get(w).index)
      }
    }
    if (info.get(v).low === info.get(v).index) {
      const component = []
      let w
      do {
        w = stack.pop()
        info.get(w).on = false
        component.push(w)
      } while (w !== v)
      if (component.length > 1) found.push(pathThrough(edges, new Set(component)))
    }
  }
  for (const v of [...edges.keys()].sort()) if (!info.has(v)) visit(v)
  return found
}

/** A concrete cycle inside a strongly connected component, for the message. */
function pathThrough(edges, component) {
  const start = [...component].sort()[0]
  const seen = new Map([[start, null]])
  const queue = [start]
  while (queue.length) {
    const v = queue.shift()
    for (const w of edges.get(v) || []) {
      if (!component.has(w)) continue
      if (w === start) {
        const cycle = [start]
        for (let u = v; u !== start; u = seen.get(u)) cycle.splice(1, 0, u)
        return [...cycle, start]
      }
      if (!seen.has(w)) {
        seen.set(w, v)
        queue.push(w)
      }
    }
  }
  return [...component]
}

module.exports = { check, rustFiles, stripped, LAYERS, JS_ORDER, TESTS_REACH }

if (require.main === module) {
  const args = process.argv.slice(2)
  const root = args.find((arg) => !arg.startsWith('--')) || path.join(__dirname, '..')
  const { problems, edges, bindingEdges } = check(root)
  if (args.includes('--graph')) {
    for (const [from, tos] of [...edges].sort()) console.log(`${from || '(core)'}: ${[...tos].sort().join(' ')}`)
    for (const [from, tos] of [...bindingEdges].sort()) console.log(`binding ${from || '(binding)'}: ${[...tos].sort().join(' ')}`)
  }
  if (problems.length) {
    console.error(problems.join('\n'))
    process.exit(1)
  }
  console.log(`src/core: ${edges.size} modules in layers ${LAYERS.join(' < ')}, no cycle`)
  console.log(`src/binding: ${bindingEdges.size} modules, no cycle, js/ in order ${JS_ORDER.join(' < ')}`)
  console.log(`tests/: the core reached only through ${TESTS_REACH.join(', ')}`)
}
