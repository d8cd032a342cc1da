'use strict'

// Every code block in README.md runs as written. JavaScript blocks run as a script of their
// own (ESM when they import or await at the top level) in a scratch project where
// `native-redis-lock` is this package, with REDIS_URL naming a private redis-server; each
// must exit 0 on its own within its time (an example that leaves a client open never does).
// TypeScript blocks are type-checked; shell blocks may only name commands that exist.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startRedis } = require('./helpers/redis-server')

const root = path.join(__dirname, '..')
const README = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
const SCRIPTS = require('../package.json').scripts
const RUN_MS = 30_000

/** The fenced blocks of `markdown`: `{ lang, code, line }`. */
function codeBlocks(markdown) {
  const blocks = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i])
    if (!open) continue
    const start = i + 1
    while (i + 1 < lines.length && !/^```\s*$/.test(lines[i + 1])) i++
    blocks.push({ lang: open[1], code: lines.slice(start, i + 1).join('\n'), line: start })
    i++
  }
  return blocks
}

const blocks = codeBlocks(README)
const isEsm = (code) => /^\s*(import|export)\s/m.test(code) || /^await\s/m.test(code)

let server
let scratch

before(async () => {
  server = await startRedis()
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-'))
  const modules = path.join(scratch, 'node_modules')
  fs.mkdirSync(modules)
  fs.symlinkSync(root, path.join(modules, 'native-redis-lock'))
  for (const dependency of ['ioredis', 'redis', '@redis', 'typescript', '@types']) {
    fs.symlinkSync(path.join(root, 'node_modules', dependency), path.join(modules, dependency))
  }
})

after(async () => {
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true })
  await server?.close()
})

function run(file, args = [], env = {}) {
  return new Promise((resolve) => {
    execFile(process.execPath, [file, ...args], { cwd: scratch, timeout: RUN_MS, env: { ...process.env, ...env } }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr }),
    )
  })
}

test('the README has code blocks, each in a language this test knows', () => {
  assert.ok(blocks.length >= 5, `only ${blocks.length} blocks`)
  for (const block of blocks) {
    assert.ok(['js', 'javascript', 'ts', 'typescript', 'sh', 'bash', 'text', ''].includes(block.lang), `line ${block.line}: \`\`\`${block.lang}`)
    assert.notEqual(block.lang, '', `line ${block.line}: a block without a language is not checked; name one (text for output)`)
  }
})

for (const [n, block] of blocks.entries()) {
  const where = `README line ${block.line}`
  if (block.lang === 'js' || block.lang === 'javascript') {
    test(`${where}: the JavaScript runs and exits by itself`, async () => {
      const file = path.join(scratch, `block-${n}.${isEsm(block.code) ? 'mjs' : 'cjs'}`)
      fs.writeFileSync(file, block.code)
      const result = await run(file, [], { REDIS_URL: server.url })
      assert.equal(result.code, 0, `exit ${result.code}\n${result.stderr}\n${result.stdout}`)
    })
  } else if (block.lang === 'ts' || block.lang === 'typescript') {
    test(`${where}: the TypeScript type-checks under --strict`, async () => {
      const file = path.join(scratch, `block-${n}.mts`)
      fs.writeFileSync(file, block.code)
      const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
      const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'ES2022', '--types', 'node', file]
      const result = await run(tsc, flags)
      assert.equal(result.code, 0, result.stdout + result.stderr)
    })
  } else if (block.lang === 'sh' || block.lang === 'bash') {
    test(`${where}: the shell commands name only scripts and files that exist`, () => {
      for (const line of block.code.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean)) {
        for (const command of line.split(/&&|;/).map((c) => c.trim())) {
          const script = /^npm run (\S+)/.exec(command)
          if (script) assert.ok(SCRIPTS[script[1]], `${where}: no npm script ${script[1]}`)
          const node = /^node (\S+\.m?js)/.exec(command)
          if (node) assert.ok(fs.existsSync(path.join(root, node[1])), `${where}: no file ${node[1]}`)
        }
      }
    })
  }
}
