#!/usr/bin/env node
'use strict'

// Checks that no two types in src/ share a name (struct, enum, union, trait or type alias,
// at any depth; a trait's or impl's associated types are not definitions of their own): a
// newcomer who finds a name once should not have to ask which one is meant. Run with no
// arguments to check this repository (exit code 1 and a list of problems when it breaks), or
// `require` it.

const path = require('node:path')
const fs = require('node:fs')
const { rustFiles, stripped } = require('./check-layers')

/**
 * Names allowed to be defined twice while a change is under way, each with the files that
 * define it (none now). The check fails when such a name gains a third definition or loses
 * one, so the list only shrinks.
 */
const LEFT_SHARED = {}

const TOKENS = /\b(impl|trait|struct|enum|union|type)\b(\s+[A-Za-z_]\w*)?|[{};]/g

/** `[{ name, line }]`: the types `text` (a Rust file) defines. */
function definitions(text) {
  const code = stripped(text)
  const found = []
  // Per open brace, whether it opened an impl or trait body, where `type X` is associated.
  const blocks = []
  let opensBody = false
  for (const m of code.matchAll(TOKENS)) {
    const [token, keyword, rawName] = m
    if (token === '{') {
      blocks.push(opensBody)
      opensBody = false
    } else if (token === '}') {
      blocks.pop()
    } else if (token === ';') {
      opensBody = false
    } else if (keyword === 'impl') {
      // An item's `impl`, not one in a type position (`-> impl Trait`, `x: impl Fn()`).
      const before = code.slice(0, m.index).trimEnd()
      if (before === '' || /[;{}\]]$|\bunsafe$/.test(before)) opensBody = true
    } else if (rawName) {
      const name = rawName.trim()
      const associated = keyword === 'type' && blocks[blocks.length - 1] === true
      if (/^[A-Z]/.test(name) && !associated) {
        found.push({ name, line: code.slice(0, m.index).split('\n').length })
      }
      if (keyword === 'trait') opensBody = true
    }
  }
  return found
}

/** `{ problems, names }`: every name defined more than once that LEFT_SHARED does not allow. */
function check(root, leftShared = LEFT_SHARED) {
  const byName = new Map()
  for (const file of rustFiles(path.join(root, 'src'))) {
    const rel = path.relative(root, file).split(path.sep).join('/')
    for (const { name, line } of definitions(fs.readFileSync(file, 'utf8'))) {
      if (!byName.has(name)) byName.set(name, [])
      byName.get(name).push({ file: rel, line })
    }
  }
  const problems = []
  for (const [name, places] of [...byName].sort()) {
    const files = places.map((p) => p.file).sort()
    const allowed = leftShared[name]
    if (places.length < 2 && !allowed) continue
    if (allowed && files.join() === [...allowed].sort().join()) continue
    const where = places.map((p) => `${p.file}:${p.line}`).join(', ')
    if (allowed) problems.push(`${name} is no longer defined just in ${allowed.join(' and ')} (${where}): update LEFT_SHARED in scripts/check-names.js`)
    else problems.push(`${name} is defined ${places.length} times: ${where}`)
  }
  for (const name of Object.keys(leftShared)) {
    if (!byName.has(name)) problems.push(`${name} is no longer defined just in ${leftShared[name].join(' and ')} (nowhere): update LEFT_SHARED in scripts/check-names.js`)
  }
  return { problems, names: byName.size }
}

module.exports = { check, definitions, LEFT_SHARED }

if (require.main === module) {
  const root = process.argv[2] || path.join(__dirname, '..')
  const { problems, names } = check(root)
  if (problems.length) {
    console.error(problems.join('\n'))
    process.exit(1)
  }
  const left = Object.keys(LEFT_SHARED)
  console.log(`src: ${names} type names, each defined once${left.length ? ` (left shared: ${left.join(', ')})` : ''}`)
}
