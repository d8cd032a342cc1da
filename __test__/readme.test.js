'use strict'

// Every code block in README.md runs as written. JavaScript blocks run as a script of their
// own (ESM when they import or await at the top level) in a scratch project where
// `native-redis-lock` is this package, with REDIS_URL naming a private redis-server; each
// must exit 0 on its own within its time (an example that leaves a client open never does).
// Every JavaScript and TypeScript block also compiles as TypeScript under --strict against the
// package's types (a JavaScript block in CommonJS with its `require`s written as imports, or
// TypeScript would not check them), and the TypeScript blocks run as compiled. Shell blocks
// may only name commands that exist.
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
// tsc over every block takes tens of seconds on a loaded 2-core machine; killed, it says nothing,
// which must not read as "no complaints".
const TSC_MS = 300_000

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
const isJs = (block) => block.lang === 'js' || block.lang === 'javascript'
const isTs = (block) => block.lang === 'ts' || block.lang === 'typescript'

/** `const { a, b } = require('m')` as `import { a, b } from 'm'`: what a .cts file type-checks. */
function asTypeScript(code) {
  return code
    .replace(/^const (\{[^}]*\}) = require\(('[^']*')\)$/gm, 'import $1 from $2')
    .replace(/^const (\w+) = require\(('[^']*')\)$/gm, 'import $1 = require($2)')
}

/** The TypeScript file block `n` compiles as, and the JavaScript tsc makes of it. */
function typeScriptFiles(n) {
  const ext = isEsm(blocks[n].code) ? 'mts' : 'cts'
  return { source: `ts/block-${n}.${ext}`, output: `ts-out/block-${n}.${ext.replace('ts', 'js')}` }
}

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
  writeTypeScriptProject()
})

/** Every JavaScript and TypeScript block as a file of one strict TypeScript project. */
function writeTypeScriptProject() {
  fs.mkdirSync(path.join(scratch, 'ts'))
  const files = []
  for (const [n, block] of blocks.entries()) {
    if (!isJs(block) && !isTs(block)) continue
    const { source } = typeScriptFiles(n)
    fs.writeFileSync(path.join(scratch, source), asTypeScript(block.code))
    files.push(source)
  }
  // The examples' premise ("The examples read the server's address from REDIS_URL"), said
  // to TypeScript, which otherwise types every variable of the environment as possibly unset.
  fs.writeFileSync(
    path.join(scratch, 'ts', 'env.d.ts'),
    'declare global {\n  namespace NodeJS {\n    interface ProcessEnv {\n      REDIS_URL: string\n    }\n  }\n}\nexport {}\n',
  )
  files.push('ts/env.d.ts')
  const compilerOptions = {
    strict: true,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'ES2022',
    lib: ['ES2022', 'ESNext.Disposable'],
    types: ['node'],
    rootDir: 'ts',
    outDir: 'ts-out',
    pretty: false,
  }
  fs.writeFileSync(path.join(scratch, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }))
}

let compiled
/** tsc over the project, once: its complaints by file (`ts/block-N.mts`). */
function compile() {
  compiled ??= run(path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), ['-p', scratch], {}, TSC_MS).then((result) => {
    const byFile = new Map()
    for (const line of result.stdout.split('\n').filter(Boolean)) {
      const file = /^(.*?)\(\d+,\d+\)/.exec(line)?.[1] ?? ''
      byFile.set(file, [...(byFile.get(file) ?? []), line])
    }
    return { code: result.code, byFile, output: result.stdout + result.stderr }
  })
  return compiled
}

async function assertCompiles(n) {
  const { code, byFile, output } = await compile()
  assert.equal(typeof code, 'number', `tsc did not finish (${code}): ${output}`)
  const { source } = typeScriptFiles(n)
  assert.deepEqual(byFile.get(source) ?? [], [], `\n${asTypeScript(blocks[n].code)}`)
  // Anything tsc said about no block in particular (the configuration, env.d.ts) is a failure too.
  const elsewhere = [...byFile.entries()].filter(([file]) => !/^ts\/block-\d+\.[cm]ts$/.test(file))
  assert.deepEqual(elsewhere, [], output)
}

after(async () => {
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true })
  await server?.close()
})

function run(file, args = [], env = {}, timeout = RUN_MS) {
  return new Promise((resolve) => {
    execFile(process.execPath, [file, ...args], { cwd: scratch, timeout, env: { ...process.env, ...env } }, (err, stdout, stderr) =>
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
  if (isJs(block)) {
    test(`${where}: the JavaScript type-checks as TypeScript under --strict`, () => assertCompiles(n))
    test(`${where}: the JavaScript runs and exits by itself`, async () => {
      const file = path.join(scratch, `block-${n}.${isEsm(block.code) ? 'mjs' : 'cjs'}`)
      fs.writeFileSync(file, block.code)
      const result = await run(file, [], { REDIS_URL: server.url })
      assert.equal(result.code, 0, `exit ${result.code}\n${result.stderr}\n${result.stdout}`)
    })
  } else if (isTs(block)) {
    test(`${where}: the TypeScript type-checks under --strict`, () => assertCompiles(n))
    test(`${where}: the TypeScript runs as compiled and exits by itself`, async () => {
      await assertCompiles(n)
      const result = await run(path.join(scratch, typeScriptFiles(n).output), [], { REDIS_URL: server.url })
      assert.equal(result.code, 0, `exit ${result.code}\n${result.stderr}\n${result.stdout}`)
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
