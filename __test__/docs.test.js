'use strict'

// The README documents every error code a caller can see and every exit code of the command
// line: the lists are read from the sources, so a new code without its row fails here.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { EXIT } = require('../lib/cli/main')

const root = path.join(__dirname, '..')
const README = fs.readFileSync(path.join(root, 'README.md'), 'utf8')

/** The rows of the README table that follows `heading`, as arrays of cells. */
function tableAfter(heading) {
  const at = README.indexOf(heading)
  assert.ok(at >= 0, `no "${heading}" in README.md`)
  const lines = README.slice(at).split('\n')
  const start = lines.findIndex((line) => line.startsWith('|'))
  const rows = []
  for (const line of lines.slice(start)) {
    if (!line.startsWith('|')) break
    rows.push(line.split('|').slice(1, -1).map((cell) => cell.trim()))
  }
  return rows.slice(2)
}

test('every LockErrorCode of index.d.ts, and every code the core makes, has a row in "### Errors"', () => {
  const types = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const declared = [.../export type LockErrorCode =([^]*?)\n\n/.exec(types)[1].matchAll(/'(E[A-Z]+)'/g)].map((m) => m[1])
  const core = fs.readFileSync(path.join(root, 'src', 'core', 'basics', 'error.rs'), 'utf8')
  // EGAVEUP ends syncguard's lock() schedule and becomes its AcquisitionTimeout (lib/syncguard/lock.js).
  const made = [...core.matchAll(/=> "(E[A-Z]+)"/g)].map((m) => m[1]).filter((code) => code !== 'EGAVEUP')
  const documented = new Set(tableAfter('### Errors').map((row) => row[1].replace(/`/g, '')))
  for (const code of new Set([...declared, ...made])) assert.ok(documented.has(code), `${code} is not in README's error table`)
  assert.ok(declared.length >= 11)
})

test('every exit code of the command line has a row in README', () => {
  const rows = tableAfter('| exit code | meaning |').map((row) => Number(row[0]))
  assert.deepEqual(rows.sort(), Object.values(EXIT).sort())
})

test("every syncguard error code our syncguard makes is named in README's syncguard's errors", () => {
  const at = README.indexOf("### syncguard's errors")
  assert.ok(at >= 0)
  const section = README.slice(at, README.indexOf('\n## ', at))
  const dir = path.join(root, 'lib', 'syncguard')
  const made = new Set()
  for (const file of fs.readdirSync(dir).filter((name) => name.endsWith('.js'))) {
    const text = fs.readFileSync(path.join(dir, file), 'utf8')
    for (const m of text.matchAll(/(?:new LockError|make)\(\s*'([A-Za-z]+)'/g)) made.add(m[1])
    for (const m of text.matchAll(/\],\s*'([A-Z][A-Za-z]+)',\s*'/g)) made.add(m[1])
  }
  assert.ok(made.has('Internal') && made.has('NetworkTimeout'), [...made].join(', '))
  for (const code of made) assert.ok(section.includes(`\`${code}\``), `${code} is not in README's syncguard's errors`)
})

/** The doc comment right above the first line of `file` that starts with `signature` (indent ignored). */
function docAbove(file, signature) {
  const lines = fs.readFileSync(path.join(root, file), 'utf8').split('\n')
  const at = lines.findIndex((line) => line.trimStart().startsWith(signature))
  assert.ok(at > 0, `${file}: no "${signature}"`)
  assert.match(lines[at - 1].trim(), /\*\/$/, `${file}: "${signature}" has no doc comment right above it`)
  let start = at - 1
  while (start > 0 && !lines[start].trim().startsWith('/**')) start--
  return lines.slice(start, at).join('\n')
}

test('the main methods of the .d.ts files have a @throws and an @example', () => {
  const main = {
    'index.d.ts': [
      'release(): Promise<void>', // LockHandle's, then ExclusiveLock's below
      'extend(additionalMs: number)',
      'acquire(key: string',
      'tryAcquire(key: string',
      'waitForLock(key: string',
      'isLocked(key: string)',
      'fencedSet(key: string',
      'using<T>(key: string',
      'acquire(): Promise<boolean>',
      'inspect(): Promise<LockInspection',
      'acquire(lockTtl?: number',
    ],
    'syncguard.d.ts': [
      'acquire: (opts',
      'release: (opts',
      'extend: (opts',
      'isLocked: (opts',
      'lookup(opts: KeyLookup)',
      'export declare function createRedisBackend(',
      'export declare function createLock(',
      'export declare function lock<',
    ],
  }
  for (const [file, signatures] of Object.entries(main)) {
    for (const signature of signatures) {
      const doc = docAbove(file, signature)
      assert.match(doc, /@throws/, `${file} ${signature}: no @throws`)
      assert.match(doc, /@example/, `${file} ${signature}: no @example`)
    }
  }
  // maestro's release never rejects, as maestro's: an example, and the doc says so.
  const release = docAbove('index.d.ts', 'release(): Promise<boolean>')
  assert.match(release, /@example/)
  assert.match(release, /never rejects/)
})
