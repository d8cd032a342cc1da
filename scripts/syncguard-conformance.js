#!/usr/bin/env node
'use strict'

// Runs syncguard's own behaviour tests (test/contracts/*.test.ts and test/e2e/*.test.ts, read
// from a syncguard checkout or bare git directory at run time, never committed here) under
// Node's test runner, against our `native-redis-lock/syncguard` entry (`--target ours`, the
// default) or against syncguard itself (`--target syncguard`, its common/ and redis/ transpiled
// from the same checkout): the second run tells which failures belong to this harness.
//
//   node scripts/syncguard-conformance.js --syncguard <git dir or checkout> [--commit 549ad5f]
//        [--target ours|syncguard] [--suite behaviour|unit] [--only=<substring>,...] [--keep]
//        [--entry <ESM file>]
//
// Each file is transpiled with `typescript` into a temp dir outside the repository, its
// `bun:test` import pointed at scripts/syncguard-conformance/bun-test.mjs and its fixture at
// one of ours (a redis-server started here on a free port, stopped by its pid). With
// `--target syncguard` it also runs our mixed-fleet stand-in beside syncguard itself
// (scripts/syncguard-conformance/standin-beside-syncguard.mjs) and our mixed-fleet test with
// syncguard's processes in the place of ours (__test__/syncguard-fleet.test.js).
// `--suite unit` runs syncguard's test/unit/**/*.test.ts instead (plan §7.4): against ours,
// each syncguard module they import (common/crypto.js, ...) is generated from what our
// lib/syncguard/*.js and entry export (scripts/syncguard-conformance/ours-internals.cjs); files
// that need syncguard's redis/, firestore/ or postgres/ internals are listed as n/a.
// `--entry` points `--target ours` at another ESM entry than ./syncguard.mjs (to check the
// harness itself, e.g. with syncguard's transpiled index.js).
// Without --syncguard it prints "skipped: no syncguard checkout" and exits 0. Not part of
// `npm test`. Exit code 1 when a test fails. Recorded runs: docs/SYNCGUARD-CONFORMANCE.md.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawn } = require('node:child_process')
const { pathToFileURL } = require('node:url')

const ROOT = path.resolve(__dirname, '..')
const SHIMS = path.join(__dirname, 'syncguard-conformance')
const FILE_TIMEOUT_MS = 10 * 60_000
// With --target syncguard: our mixed-fleet test, syncguard itself in the place of ours.
const FLEET_TEST = path.join(ROOT, '__test__', 'syncguard-fleet.test.js')
/** A failure that opened a file of syncguard's repository by a relative path, and found none. */
const READS_SYNCGUARD_FILES = /^"ENOENT: no such file or directory, open '(common|redis|firestore|postgres|docs)\//

function parseArgs(argv) {
  const out = { target: 'ours', suite: 'behaviour', commit: 'HEAD', only: [], keep: false }
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s)
    const value = () => inline ?? argv[++i]
    if (flag === '--syncguard') out.syncguard = value()
    else if (flag === '--commit') out.commit = value()
    else if (flag === '--target') out.target = value()
    else if (flag === '--only') out.only = value().split(',')
    else if (flag === '--keep') out.keep = true
    else if (flag === '--entry') out.entry = value()
    else if (flag === '--suite') out.suite = value()
    else throw new Error(`unknown argument ${JSON.stringify(argv[i])}`)
  }
  if (!['behaviour', 'unit'].includes(out.suite)) throw new Error(`--suite must be behaviour or unit, got ${JSON.stringify(out.suite)}`)
  if (!['ours', 'syncguard'].includes(out.target)) throw new Error(`--target must be ours or syncguard, got ${JSON.stringify(out.target)}`)
  return out
}

/** `git` bound to the checkout: a work tree (has .git) or a bare git directory. */
function gitOf(dir) {
  const base = fs.existsSync(path.join(dir, '.git')) ? ['-C', dir] : [`--git-dir=${dir}`]
  const git = (...args) => execFileSync('git', [...base, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 })
  git.command = ['git', ...base].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ')
  return git
}

/** Module specifiers the transpiled files need pointed elsewhere: `map(spec)` → a path. */
function rewriteImports(code, fileDir, map) {
  return code.replace(/(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)(["'])([^"']+)\2/g, (all, lead, quote, spec) => {
    const to = map(spec)
    if (to === undefined) return all
    let rel = path.relative(fileDir, to).split(path.sep).join('/')
    if (!rel.startsWith('.')) rel = `./${rel}`
    return `${lead}${quote}${rel}${quote}`
  })
}

/**
 * Bun gives ES modules a `require`; Node does not. Prepended to a test that calls it (run with
 * --experimental-require-module, so that it can load the ES modules it names).
 */
const REQUIRE_IN_ESM = "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);"

/** `[{ spec, names }]`: what a transpiled module imports (`names`: its named value imports). */
function importsOf(code) {
  const out = []
  for (const m of code.matchAll(/\bimport\s*(?:\{([^}]*)\}|[^'"]*?)\s*(?:from\s*)?["']([^"']+)["']/g)) {
    const names = (m[1] ?? '').split(',').map((n) => n.trim().split(/\s+as\s+/)[0]).filter(Boolean)
    out.push({ spec: m[2], names })
  }
  // Bun lets ESM call require(); a few unit tests do (see REQUIRE_IN_ESM).
  for (const m of code.matchAll(/\brequire\s*\(\s*["']([^"']+)["']\s*\)/g)) out.push({ spec: m[1], names: [] })
  return out
}

/**
 * Transpiles the TypeScript files `names` (paths in the checkout) into `tmp`, same layout, with
 * `resolve(spec, name)` giving where an import points (undefined: left as is). A file for which
 * `skip(name, imports)` gives a reason is not written: `{ written, skipped: [{ name, reason }] }`.
 */
function transpile(ts, git, commit, names, tmp, resolve, skip = () => undefined) {
  const written = []
  const skipped = []
  for (const name of names) {
    const source = git('show', `${commit}:${name}`)
    const { outputText } = ts.transpileModule(source, {
      fileName: name,
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, sourceMap: false },
    })
    const imports = importsOf(outputText).map((i) => ({ ...i, to: resolve(i.spec, name) }))
    const reason = skip(name, imports)
    if (reason) {
      skipped.push({ name, reason })
      continue
    }
    const out = path.join(tmp, name.replace(/\.ts$/, '.js'))
    fs.mkdirSync(path.dirname(out), { recursive: true })
    const code = rewriteImports(outputText, path.dirname(out), (spec) => resolve(spec, name))
    fs.writeFileSync(out, /\brequire\s*\(/.test(code) ? `${REQUIRE_IN_ESM}\n${code}` : code)
    written.push({ name, imports })
  }
  return { written, skipped }
}

/**
 * `--suite unit --target ours`: one generated module per syncguard module the tests import
 * (under tmp/ours/), exporting each imported name from ours-internals.cjs. Returns the names
 * ours lacks.
 */
function writeOursModules(tmp, written) {
  const wanted = new Map()
  for (const { imports } of written) {
    for (const { to, names } of imports) {
      if (!to?.startsWith(path.join(tmp, 'ours') + path.sep)) continue
      if (!wanted.has(to)) wanted.set(to, new Set())
      for (const n of names) wanted.get(to).add(n)
    }
  }
  const internals = path.join(SHIMS, 'ours-internals.cjs')
  const ours = require(internals)
  const missing = new Set()
  for (const [file, names] of wanted) {
    const lines = ["import { createRequire } from 'node:module'", `const ours = createRequire(import.meta.url)(${JSON.stringify(internals)})`]
    // Every name ours has (a require() of the module names none), and each one asked for.
    for (const n of [...new Set([...Object.keys(ours), ...names])].sort()) {
      lines.push(`export const ${n} = ours.${n}`)
      if (!(n in ours)) missing.add(n)
    }
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, `${lines.join('\n')}\n`)
  }
  return [...missing].sort()
}

/** Lays out the temp dir; returns the test files to run (relative to `tmp`) and those skipped. */
function prepare({ target, suite, git, commit, tmp }) {
  const ts = require('typescript')
  const listed = git('ls-tree', '-r', '--name-only', commit).split('\n')
  const has = new Set(listed)
  const pattern = suite === 'unit' ? /^test\/unit\/.*\.test\.ts$/ : /^test\/(contracts|e2e)\/[^/]+\.test\.ts$/
  const tests = listed.filter((n) => pattern.test(n))
  const ioredis = require.resolve('ioredis', { paths: [path.join(ROOT, 'bench'), ROOT] })
  fs.writeFileSync(path.join(tmp, 'package.json'), '{ "type": "module" }\n')
  fs.mkdirSync(path.join(tmp, 'shims'))
  fs.copyFileSync(path.join(SHIMS, 'bun-test.mjs'), path.join(tmp, 'shims', 'bun-test.js'))
  const fixture = path.join(tmp, 'test', 'fixtures', 'backends.js')
  fs.mkdirSync(path.dirname(fixture), { recursive: true })
  fs.copyFileSync(path.join(SHIMS, 'redis-fixture.mjs'), path.join(tmp, 'test', 'fixtures', 'redis-fixture.js'))
  const oursUnit = target === 'ours' && suite === 'unit'
  // A relative import names a file of the checkout, with or without `.js`, or a folder's index.
  const resolve = (spec, from) => {
    if (spec === 'bun:test') return path.join(tmp, 'shims', 'bun-test.js')
    if (spec === 'ioredis') return ioredis
    if (!spec.startsWith('.')) return undefined
    const at = path.posix.join(path.posix.dirname(from), spec).replace(/\.js$/, '')
    const file = has.has(`${at}.ts`) ? `${at}.js` : has.has(`${at}/index.ts`) ? `${at}/index.js` : undefined
    if (!file) return undefined
    if (oursUnit && /^(common\/|index\.js$)/.test(file)) return path.join(tmp, 'ours', file)
    return path.join(tmp, file)
  }
  // What cannot run here: syncguard's other backends (their packages are not installed), and,
  // against ours, tests of syncguard's redis/ internals (ours has none of those files).
  const skip = (name, imports) => {
    const reaches = (re) => imports.some((i) => re.test(i.spec) || (i.to && re.test(path.relative(tmp, i.to))))
    if (reaches(/^(@google-cloud\/firestore|postgres)$|^(firestore|postgres)\//)) return "needs syncguard's firestore or postgres backend"
    if (oursUnit && reaches(/^redis\//)) return "imports syncguard's redis/ internals"
    return undefined
  }
  if (target === 'syncguard') {
    // The whole checkout too: a few unit tests read syncguard's own sources and docs (by paths
    // relative to the working directory, the temp dir).
    execFileSync('sh', ['-c', `${git.command} archive ${commit} | tar -x -C "${tmp}"`])
    const sources = listed.filter((n) => /^(common|redis)\/.*\.ts$/.test(n) && !n.endsWith('.d.ts')).concat(has.has('index.ts') ? ['index.ts'] : [])
    transpile(ts, git, commit, sources, tmp, resolve, (name, imports) => (name === 'index.ts' ? undefined : skip(name, imports)))
    fs.copyFileSync(path.join(SHIMS, 'backends-syncguard.mjs'), fixture)
    fs.mkdirSync(path.join(tmp, 'standin'))
    fs.copyFileSync(path.join(SHIMS, 'standin-beside-syncguard.mjs'), path.join(tmp, 'standin', 'beside-syncguard.test.js'))
    // syncguard's root and redis entries in one module: what the fleet test loads for "ours".
    fs.writeFileSync(path.join(tmp, 'syncguard-entry.js'), "export * from './index.js'\nexport { createRedisBackend, createLock } from './redis/index.js'\n")
  } else if (suite !== 'unit') {
    fs.mkdirSync(path.join(tmp, 'common'))
    for (const name of ['errors.js', 'auto-lock.js']) fs.copyFileSync(path.join(SHIMS, 'common-ours.mjs'), path.join(tmp, 'common', name))
    fs.writeFileSync(path.join(tmp, 'common', 'types.js'), 'export {}\n')
    fs.copyFileSync(path.join(SHIMS, 'backends-ours.mjs'), fixture)
  }
  const { written, skipped } = transpile(ts, git, commit, tests, tmp, resolve, skip)
  const missing = oursUnit ? writeOursModules(tmp, written) : []
  const extra = target === 'syncguard' && suite !== 'unit' ? ['standin/beside-syncguard.test.js', FLEET_TEST] : []
  return { tests: [...written.map((w) => w.name.replace(/\.ts$/, '.js')), ...extra], skipped, missing, ioredis }
}

/**
 * Leaf results out of node's TAP output: `{ pass, fail, skip, byFixture, failures }`, where
 * `byFixture` tallies the tests under each suite one below the file's top suite (the fixture)
 * and each failure `{ name, error }` is named with those suites (fixture › test).
 */
function readTap(text) {
  const count = (label) => Number(new RegExp(`^# ${label} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)
  const failures = []
  const byFixture = {}
  const suites = []
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const subtest = /^(\s*)# Subtest: (.*)$/.exec(lines[i])
    if (subtest) suites[subtest[1].length / 4] = subtest[2]
    const m = /^(\s*)(not )?ok \d+ - (.*?)( # SKIP.*)?$/.exec(lines[i])
    if (!m) continue
    const yaml = []
    for (let j = i + 1; j < lines.length && !/^\s*(\.\.\.|# Subtest:|(not )?ok \d+ )/.test(lines[j]); j++) yaml.push(lines[j])
    const block = yaml.join('\n')
    if (/type: 'suite'/.test(block) || /failureType: 'subtestsFailed'/.test(block)) continue
    const depth = m[1].length / 4
    const tally = (byFixture[depth >= 2 ? suites[1] : '(file)'] ??= { pass: 0, fail: 0, skip: 0 })
    if (m[4]) tally.skip++
    else if (m[2]) tally.fail++
    else tally.pass++
    if (!m[2]) continue
    const error = /\berror: ([\s\S]*?)(?:\n\s*(?:code|name|expected|actual|operator|stack|failureType|location|cause):|$)/.exec(block)?.[1]
    const name = [...suites.slice(1, depth), m[3]].join(' › ')
    failures.push({ name, error: error?.replace(/\s+/g, ' ').replace(/^\|-? ?/, '').trim() ?? '(no message)' })
  }
  return { pass: count('pass'), fail: count('fail') + count('cancelled'), skip: count('skipped') + count('todo'), byFixture, failures }
}

function runFile(file, env, cwd) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--experimental-require-module', '--no-warnings', '--test', '--test-concurrency=1', '--test-reporter=tap', file], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    const timer = setTimeout(() => process.kill(child.pid, 'SIGKILL'), FILE_TIMEOUT_MS)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  if (!args.syncguard) {
    console.log('skipped: no syncguard checkout')
    return 0
  }
  const git = gitOf(path.resolve(args.syncguard))
  const commit = git('rev-parse', '--verify', `${args.commit}^{commit}`).trim()
  const entry = path.resolve(args.entry ?? path.join(ROOT, 'syncguard.mjs'))
  if (args.target === 'ours' && args.suite === 'behaviour' && !fs.existsSync(entry)) throw new Error(`--target ours needs our entry ${entry}, which is not there`)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'syncguard-conformance-'))
  const { startRedis } = require(path.join(ROOT, '__test__', 'helpers', 'redis-server.js'))
  const server = await startRedis()
  let failed = 0
  try {
    const { tests, skipped, missing, ioredis } = prepare({ target: args.target, suite: args.suite, git, commit, tmp })
    const env = {
      ...process.env,
      SG_CONF_PORT: String(server.port),
      SG_CONF_IOREDIS: ioredis,
      SG_CONF_ENTRY: entry,
      SG_CONF_NATIVE: path.join(ROOT, 'lib', 'native.js'),
      SG_CONF_ROOT: ROOT,
      ...(args.target === 'syncguard' ? { SG_FLEET_IMPLEMENTATION: path.join(tmp, 'syncguard-entry.js') } : {}),
      SG_CONF_STANDIN: path.join(ROOT, '__test__', 'helpers', 'syncguard-standin.js'),
    }
    const chosen = tests.filter((t) => args.only.length === 0 || args.only.some((o) => t.includes(o)))
    console.log(`syncguard ${commit.slice(0, 7)} · ${args.suite} tests · target ${args.target} · redis-server :${server.port} (pid ${server.pid}) · ${tmp}`)
    for (const { name, reason } of skipped) console.log(`n/a  ${name.replace(/^test\//, '')}: ${reason}`)
    if (missing.length) console.log(`ours has no ${missing.join(', ')} (what uses them fails)`)
    const totals = { pass: 0, fail: 0, skip: 0, na: 0 }
    for (const test of chosen) {
      const started = Date.now()
      const { code, out } = await runFile(test, env, tmp)
      fs.writeFileSync(path.join(tmp, `${path.basename(test)}.tap`), out)
      const label = path.isAbsolute(test) ? `${path.relative(ROOT, test)} (syncguard as "ours")` : test.replace(/^test\//, '')
      const r = readTap(out)
      if (code !== 0 && r.fail === 0) r.fail = 1 // the file itself broke (load error, timeout)
      // Against ours, a test that reads syncguard's own source or docs (time-helpers lints its
      // repository) has nothing of ours to read: not applicable, counted apart.
      const foreign = args.target === 'ours' ? r.failures.filter((f) => READS_SYNCGUARD_FILES.test(f.error)) : []
      r.failures = r.failures.filter((f) => !foreign.includes(f))
      r.fail -= foreign.length
      r.na = foreign.length
      for (const k of Object.keys(totals)) totals[k] += r[k]
      failed += r.fail
      const secs = ((Date.now() - started) / 1000).toFixed(1)
      console.log(`${r.fail ? 'FAIL' : 'ok  '} ${label.padEnd(36)} pass ${r.pass}  fail ${r.fail}  skipped ${r.skip}${r.na ? `  n/a ${r.na} (read syncguard's own files)` : ''}  (${secs} s)`)
      const fixtures = Object.entries(r.byFixture)
      if (args.suite === 'behaviour' && fixtures.length > 1) console.log(`       ${fixtures.map(([name, t]) => `${name}: ${t.pass}/${t.pass + t.fail}`).join(' · ')}`)
      for (const f of r.failures) console.log(`       ✗ ${f.name}: ${f.error.slice(0, 300)}`)
      if (code !== 0 && r.failures.length === 0 && !r.na) console.log(out.split('\n').slice(-15).map((l) => `       | ${l}`).join('\n'))
    }
    console.log(`total: pass ${totals.pass}  fail ${totals.fail}  skipped ${totals.skip}${totals.na ? `  n/a ${totals.na}` : ''}`)
  } finally {
    await server.close()
    if (args.keep) console.log(`kept ${tmp}`)
    else fs.rmSync(tmp, { recursive: true, force: true })
  }
  return failed ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err.message)
    process.exit(2)
  },
)
