'use strict'

// A child node process running a fixture, its stdout lines collected: `ready` resolves on
// its "ready" line, `exited` with its exit code. Each is added to `children` until it exits,
// for the test's `after` to kill by pid.
const { spawn } = require('node:child_process')
const readline = require('node:readline')

function startChild(fixture, env, children) {
  const proc = spawn(process.execPath, [fixture], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.add(proc)
  const kid = { proc, lines: [], stderr: '' }
  proc.stderr.on('data', (chunk) => {
    kid.stderr += chunk
  })
  const lines = readline.createInterface({ input: proc.stdout })
  kid.ready = new Promise((resolve, reject) => {
    lines.on('line', (line) => {
      kid.lines.push(line)
      if (line === 'ready') resolve()
    })
    proc.once('exit', () => reject(new Error(`child exited before ready: ${kid.stderr}`)))
  })
  kid.exited = new Promise((resolve) => {
    proc.once('exit', (code) => {
      children.delete(proc)
      resolve(code)
    })
  })
  return kid
}

/** SIGKILLs, by pid, every child process still in `children`. */
function killAll(children) {
  for (const proc of children) {
    try {
      process.kill(proc.pid, 'SIGKILL')
    } catch {}
  }
}

/** The first JSON line of `kid` that has `field`, waited for up to `timeoutMs`. */
async function line(kid, field, timeoutMs = 15_000) {
  const until = Date.now() + timeoutMs
  for (;;) {
    for (const text of kid.lines) {
      if (!text.startsWith('{')) continue
      const value = JSON.parse(text)
      if (field in value) return value
    }
    if (Date.now() > until) throw new Error(`child ${kid.proc.pid} printed no ${field}; stderr: ${kid.stderr}`)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

module.exports = { startChild, killAll, line }
