'use strict'

// Starts a private redis-server on a free loopback port for one test file, and stops it by
// its pid. No test touches a Redis it did not start. A missing redis-server fails loudly.
const { spawn, execFileSync } = require('node:child_process')
const net = require('node:net')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

function redisServerBinary() {
  const candidates = [process.env.REDIS_SERVER_BIN, '/usr/bin/redis-server', '/usr/local/bin/redis-server']
  for (const file of candidates) if (file && fs.existsSync(file)) return file
  try {
    return execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim()
  } catch {
    throw new Error('redis-server is not installed: the tests need it (apt-get install redis-server)')
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/** Resolves once the server answers PING (or asks for AUTH), rejects after `timeoutMs`. */
async function waitUntilReady(port, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const ok = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1')
      socket.setTimeout(500)
      socket.once('connect', () => socket.write('PING\r\n'))
      socket.once('data', (data) => {
        socket.destroy()
        resolve(/^(\+PONG|-NOAUTH)/.test(data.toString()))
      })
      socket.once('error', () => resolve(false))
      socket.once('timeout', () => {
        socket.destroy()
        resolve(false)
      })
    })
    if (ok) return
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`redis-server on port ${port} did not become ready`)
}

/** `ready`, or a rejection as soon as `child` fails to start or exits (`err.exited`). */
function readyOrExited(child, ready, what) {
  return new Promise((resolve, reject) => {
    const exited = (code, signal) => reject(Object.assign(new Error(`${what} exited (${signal ?? code}) before it was ready`), { exited: true }))
    const failed = (err) => reject(new Error(`cannot start ${what}: ${err.message}`))
    child.once('exit', exited)
    child.once('error', failed)
    ready.then(resolve, reject).finally(() => {
      child.off('exit', exited)
      child.off('error', failed)
    })
  })
}

const live = new Set()
process.on('exit', () => {
  for (const child of live) {
    try {
      process.kill(child.pid, 'SIGKILL')
    } catch {}
  }
})

/** Kills `child` by pid if this process exits while it still runs. */
function track(child) {
  live.add(child)
  child.once('exit', () => live.delete(child))
}

class RedisServer {
  constructor({ args = [], password } = {}) {
    this.extraArgs = args
    this.password = password
    this.port = undefined
    this.child = undefined
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nrl-redis-'))
  }

  get url() {
    const auth = this.password ? `:${encodeURIComponent(this.password)}@` : ''
    return `redis://${auth}127.0.0.1:${this.port}`
  }

  get pid() {
    return this.child?.pid
  }

  /** The listening arguments; a TLS server overrides them. */
  listenArgs() {
    return ['--port', String(this.port), '--bind', '127.0.0.1']
  }

  /** Resolves once the server answers; a TLS server probes over TLS instead. */
  waitReady() {
    return waitUntilReady(this.port)
  }

  async start() {
    // A port chosen here can be taken by another process between the check and the bind:
    // the server then exits at once, and is started again on another port.
    const chosen = this.port === undefined
    for (let tries = 1; ; tries++) {
      this.port ??= await freePort()
      try {
        await this.#spawn()
        return this
      } catch (err) {
        // Nothing left running: a test process that keeps a child alive never exits.
        await this.stop('SIGKILL')
        if (!chosen || !err.exited || tries === 3) throw err
        this.port = undefined
      }
    }
  }

  #spawn() {
    const args = [
      ...this.listenArgs(),
      '--save', '',
      '--appendonly', 'no',
      '--daemonize', 'no',
      '--dir', this.dir,
      '--logfile', '',
      ...(this.password ? ['--requirepass', this.password] : []),
      ...this.extraArgs,
    ]
    const child = spawn(redisServerBinary(), args, { stdio: ['ignore', 'ignore', 'inherit'] })
    this.child = child
    track(child)
    return readyOrExited(child, this.waitReady(), `redis-server on port ${this.port}`)
  }

  /** Stops the server (SIGTERM, SIGKILL after 3 s) and waits until it has exited. */
  async stop(signal = 'SIGTERM') {
    const child = this.child
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    process.kill(child.pid, signal)
    const timer = setTimeout(() => {
      try {
        process.kill(child.pid, 'SIGKILL')
      } catch {}
    }, 3000)
    await exited
    clearTimeout(timer)
  }

  kill() {
    return this.stop('SIGKILL')
  }

  pause() {
    process.kill(this.child.pid, 'SIGSTOP')
  }

  resume() {
    process.kill(this.child.pid, 'SIGCONT')
  }

  /** Same port, empty data. */
  async restart() {
    await this.stop()
    await this.start()
  }

  async close() {
    await this.stop()
    fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/** Starts a server; `t.after`-style cleanup is the caller's (`after(() => server.close())`). */
async function startRedis(options) {
  return new RedisServer(options).start()
}

module.exports = { startRedis, RedisServer, freePort, redisServerBinary, track }
