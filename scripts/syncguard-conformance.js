#!/usr/bin/env node
'use strict'

// Runs syncguard's own behaviour tests (test/contracts/*.test.ts and test/e2e/*.test.ts, read
// from a syncguard checkout or bare git directory at run time, never committed here) under
// Node's test runner, against our `native-redis-lock/syncguard` entry (`--target ours`, the
// default) or against syncguard itself (`--target syncguard`, its common/ and redis/ transpiled
// from the same checkout): the second run tells which failures belong to this harness.
//
//   node scripts/syncguard-conformance.js --syncguard <git dir or checkout> [--commit 549ad5f]
//        [--target ours|syncguard] [--only=<substring>,...] [--keep] [--entry <ESM file>]
//
// Each file is transpiled with `typescript` into a temp dir outside the repository, its
// `bun:test` import pointed at scripts/syncguard-conformance/bun-test.mjs and its fixture at
// one of ours (a redis-server started here on a free port, stopped by its pid). With
// `--target syncguard` it also runs our mixed-fleet stand-in beside syncguard itself
// (scripts/syncguard-conformance/standin-beside-syncguard.mjs). Without
// --syncguard it prints "skipped: no syncguard checkout" and exits 0. Not part of `npm test`.
// `--entry` points `--target ours` at another ESM entry than ./syncguard.mjs (to check the
// harness itself, e.g. with syncguard's transpiled index.js). Exit code 1 when any test fails. See docs/SYNCGUARD-CONFORMANCE.md for recorded runs.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawn } = require('node:child_process')
const { pathToFileURL } = require('node:url')

const ROOT = path.resolve(__dirname, '..')
const SHIMS = path.join(__dirname, 'syncguard-conformance')
const FILE_TIMEOUT_MS = 10 * 60_000

function parseArgs(argv) {
  const out = { target: 'ours', commit: 'HEAD', only: [], keep: false }
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s)
    const value = () => inline ?? argv[++i]
    if (flag === '--syncguard') out.syncguard = value()
    else if (flag === '--commit') out.commit = value()
    else if (flag === '--target') out.target = value()
    else if (flag === '--only') out.only = value().split(',')
    else if (flag === '--keep') out.keep = true
    else if (flag === '--entry') out.entry = value()
    else throw new Error(`unknown argument ${JSON.stringify(argv[i])}`)
  }
  if (!['ours', 'syncguard'].includes(out.target)) throw new Error(`--target must be ours or syncguard, got ${JSON.stringify(out.target)}`)
  return out
}

/** `git` bound to the checkout: a work tree (has .git) or a bare git directory. */
function gitOf(dir) {
  const base = fs.existsSync(path.join(dir, '.git')) ? ['-C', dir] : [`--git-dir=${dir}`]
  return (...args) => execFileSync('git', [...base, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 })
}

/** Module specifiers the transpiled files need pointed elsewhere. */
function rewriteImports(code, fileDir, map) {
  return code.replace(/(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])([^"']+)\2/g, (all, lead, quote, spec) => {
    const to = map(spec)
    if (to === undefined) return all
    let rel = path.relative(fileDir, to).split(path.sep).join('/')
    if (!rel.startsWith('.')) rel = `./${rel}`
    return `${lead}${quote}${rel}${quote}`
  })
}

/** Transpiles the TypeScript files `names` (paths in the checkout) into `tmp`, same layout. */
function transpile(ts, git, commit, names, tmp, map) {
  for (const name of names) {
    const source = git('show', `${commit}:${name}`)
    const { outputText } = ts.transpileModule(source, {
      fileName: name,
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, sourceMap: false },
    })
    const out = path.join(tmp, name.replace(/\.ts$/, '.js'))
    fs.mkdirSync(path.dirname(out), { recursive: true })
    fs.writeFileSync(out, rewriteImports(outputText, path.dirname(out), map))
  }
}

/** Lays out the temp dir for `target`; returns the test files to run (relative to `tmp`). */
function prepare({ target, git, commit, tmp }) {
  const ts = require('typescript')
  const listed = git('ls-tree', '-r', '--name-only', commit).split('\n')
  const tests = listed.filter((n) => /^test\/(contracts|e2e)\/[^/]+\.test\.ts$/.test(n))
  const ioredis = require.resolve('ioredis', { paths: [path.join(ROOT, 'bench'), ROOT] })
  fs.writeFileSync(path.join(tmp, 'package.json'), '{ "type": "module" }\n')
  fs.mkdirSync(path.join(tmp, 'shims'))
  fs.copyFileSync(path.join(SHIMS, 'bun-test.mjs'), path.join(tmp, 'shims', 'bun-test.js'))
  const fixture = path.join(tmp, 'test', 'fixtures', 'backends.js')
  fs.mkdirSync(path.dirname(fixture), { recursive: true })
  fs.copyFileSync(path.join(SHIMS, 'redis-fixture.mjs'), path.join(tmp, 'test', 'fixtures', 'redis-fixture.js'))
  const map = (spec) => {
    if (spec === 'bun:test') return path.join(tmp, 'shims', 'bun-test.js')
    if (spec === 'ioredis') return ioredis
    return undefined
  }
  if (target === 'syncguard') {
    const sources = listed.filter((n) => /^(common|redis)\/.*\.ts$/.test(n) && !n.endsWith('.d.ts'))
    transpile(ts, git, commit, sources, tmp, map)
    fs.copyFileSync(path.join(SHIMS, 'backends-syncguard.mjs'), fixture)
    fs.mkdirSync(path.join(tmp, 'standin'))
    fs.copyFileSync(path.join(SHIMS, 'standin-beside-syncguard.mjs'), path.join(tmp, 'standin', 'beside-syncguard.test.js'))
  } else {
    fs.mkdirSync(path.join(tmp, 'common'))
    for (const name of ['errors.js', 'auto-lock.js']) fs.copyFileSync(path.join(SHIMS, 'common-ours.mjs'), path.join(tmp, 'common', name))
    fs.writeFileSync(path.join(tmp, 'common', 'types.js'), 'export {}\n')
    fs.copyFileSync(path.join(SHIMS, 'backends-ours.mjs'), fixture)
  }
  transpile(ts, git, commit, tests, tmp, map)
  const extra = target === 'syncguard' ? ['standin/beside-syncguard.test.js'] : []
  return { tests: [...tests.map((n) => n.replace(/\.ts$/, '.js')), ...extra], ioredis }
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
    const child = spawn(process.execPath, ['--test', '--test-concurrency=1', '--test-reporter=tap', file], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
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
  if (args.target === 'ours' && !fs.existsSync(entry)) throw new Error(`--target ours needs our entry ${entry}, which is not there`)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'syncguard-conformance-'))
  const { startRedis } = require(path.join(ROOT, '__test__', 'helpers', 'redis-server.js'))
  const server = await startRedis()
  let failed = 0
  try {
    const { tests, ioredis } = prepare({ target: args.target, git, commit, tmp })
    const env = {
      ...process.env,
      SG_CONF_PORT: String(server.port),
      SG_CONF_IOREDIS: ioredis,
      SG_CONF_ENTRY: entry,
      SG_CONF_NATIVE: path.join(ROOT, 'lib', 'native.js'),
      SG_CONF_STANDIN: path.join(ROOT, '__test__', 'helpers', 'syncguard-standin.js'),
    }
    const chosen = tests.filter((t) => args.only.length === 0 || args.only.some((o) => t.includes(o)))
    console.log(`syncguard ${commit.slice(0, 7)} · target ${args.target} · redis-server :${server.port} (pid ${server.pid}) · ${tmp}`)
    const totals = { pass: 0, fail: 0, skip: 0 }
    for (const test of chosen) {
      const started = Date.now()
      const { code, out } = await runFile(test, env, tmp)
      fs.writeFileSync(path.join(tmp, `${path.basename(test)}.tap`), out)
      const r = readTap(out)
      if (code !== 0 && r.fail === 0) r.fail = 1 // the file itself broke (load error, timeout)
      for (const k of Object.keys(totals)) totals[k] += r[k]
      failed += r.fail
      const secs = ((Date.now() - started) / 1000).toFixed(1)
      console.log(`${r.fail ? 'FAIL' : 'ok  '} ${test.replace(/^test\//, '').padEnd(36)} pass ${r.pass}  fail ${r.fail}  skipped ${r.skip}  (${secs} s)`)
      const fixtures = Object.entries(r.byFixture)
      if (fixtures.length > 1) console.log(`       ${fixtures.map(([name, t]) => `${name}: ${t.pass}/${t.pass + t.fail}`).join(' · ')}`)
      for (const f of r.failures) console.log(`       ✗ ${f.name}: ${f.error.slice(0, 300)}`)
      if (code !== 0 && r.failures.length === 0) console.log(out.split('\n').slice(-15).map((l) => `       | ${l}`).join('\n'))
    }
    console.log(`total: pass ${totals.pass}  fail ${totals.fail}  skipped ${totals.skip}`)
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
