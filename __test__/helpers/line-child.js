'use strict'

// A child node process running a fixture, every stdout line kept with the time it arrived
// (performance.now()), so a test can order what children printed against its own events.
// It sits in `children` until it exits, for the test's `after` to kill by pid (child.js `killAll`).
const { spawn } = require('node:child_process')
const readline = require('node:readline')

class LineChild {
  /** `env` is added to this process's environment, less the names `dropEnv` matches. */
  constructor(fixture, args, env, children, dropEnv = () => false) {
    this.lines = []
    this.waiters = []
    this.stderr = ''
    this.exit = null
    const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !dropEnv(name)))
    this.proc = spawn(process.execPath, [fixture, ...args], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    children.add(this.proc)
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        children.delete(this.proc)
        this.exit = { code, signal, at: performance.now() }
        resolve(this.exit)
      })
    })
    this.proc.stderr.on('data', (chunk) => {
      this.stderr += chunk
    })
    readline.createInterface({ input: this.proc.stdout }).on('line', (line) => {
      this.lines.push({ line, at: performance.now() })
      for (const waiter of [...this.waiters]) waiter()
    })
  }

  get pid() {
    return this.proc.pid
  }

  get running() {
    return this.exit === null
  }

  /**
   * The first line matching `predicate`, with its arrival time. Rejects after `timeoutMs`, or
   * once the child has exited without printing one (its stdout given a moment to drain).
   */
  waitForLine(predicate, timeoutMs = 15_000, what = 'matching') {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.lines.find(({ line }) => predicate(line))
        if (!found) return
        this.waiters = this.waiters.filter((w) => w !== check)
        clearTimeout(timer)
        resolve(found)
      }
      const fail = (why) => {
        this.waiters = this.waiters.filter((w) => w !== check)
        clearTimeout(timer)
        const printed = JSON.stringify(this.lines.map((l) => l.line))
        reject(new Error(`child ${this.pid} printed no ${what} line (${why}); stdout: ${printed}; stderr: ${this.stderr}`))
      }
      const timer = setTimeout(() => fail('timeout'), timeoutMs)
      this.waiters.push(check)
      this.exited.then(() => setTimeout(() => {
        check()
        if (this.waiters.includes(check)) fail('exited')
      }, 200))
      check()
    })
  }

  /** The exit, or null after `timeoutMs`. */
  async exitWithin(timeoutMs) {
    let timer
    const timeout = new Promise((resolve) => {
      timer = setTimeout(() => resolve(null), timeoutMs)
    })
    const exit = await Promise.race([this.exited, timeout])
    clearTimeout(timer)
    return exit
  }
}

module.exports = { LineChild }
