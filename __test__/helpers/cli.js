'use strict'

// Runs the real command-line binary (bin/native-redis-lock.js) as a child process, and in a
// pseudo-terminal through util-linux's `script`, for __test__/cli*.test.js.
const path = require('node:path')
const { execFile, spawn } = require('node:child_process')

const BIN = path.join(__dirname, '..', '..', 'bin', 'native-redis-lock.js')

/** The environment without REDIS_URL, so only what a test passes names a server. */
function cleanEnv(extra = {}) {
  const env = { ...process.env, ...extra }
  if (!('REDIS_URL' in extra)) delete env.REDIS_URL
  return env
}

/** Runs the binary with `args`: `{ code, stdout, stderr }`. */
function cli(args, { env, input, timeoutMs = 30_000 } = {}) {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [BIN, ...args], { env: cleanEnv(env), timeout: timeoutMs }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    )
    if (input !== undefined) child.stdin.end(input)
    else child.stdin.end()
  })
}

function quote(arg) {
  return `'${arg.replace(/'/g, `'\\''`)}'`
}

/**
 * Runs the binary in a pseudo-terminal (`script -qefc`): stdin and stdout are a terminal.
 * Answers the child, its output so far (`output()`), and `done`, `{ code, output }`.
 */
function inTerminal(args, { env } = {}) {
  const command = [process.execPath, BIN, ...args].map(quote).join(' ')
  const child = spawn('script', ['-qefc', command, '/dev/null'], { env: cleanEnv({ TERM: 'xterm', ...env }) })
  let output = ''
  child.stdout.on('data', (chunk) => { output += chunk.toString('utf8') })
  child.stderr.on('data', (chunk) => { output += chunk.toString('utf8') })
  const done = new Promise((resolve) => child.on('close', (code) => resolve({ code, output })))
  return { child, output: () => output, done }
}

/**
 * Runs the binary with `args`, its output read as it comes: the child, its stdout so far
 * (`output()`), and `done`, `{ code, stdout, stderr }`.
 */
function running(args, { env } = {}) {
  const child = spawn(process.execPath, [BIN, ...args], { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk) => { stdout += chunk.toString('utf8') })
  child.stderr.on('data', (chunk) => { stderr += chunk.toString('utf8') })
  const done = new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })))
  return { child, output: () => stdout, done }
}

/** Resolves once `test(output)` holds, rejects after `timeoutMs`. */
async function until(read, test, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs
  while (!test(read())) {
    if (Date.now() > deadline) throw new Error(`timed out; output so far:\n${read()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

module.exports = { cli, inTerminal, running, until, BIN }
