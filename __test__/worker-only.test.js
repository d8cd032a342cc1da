'use strict'

// A process whose main thread never loads the package, only its worker threads do: once every
// such worker has ended, the runtime the package runs its Redis calls on must still be there
// for the workers started later (their calls answered, their watchdogs refreshing, the locks
// of the terminated ones released), not shut down with the last environment that used it.
// Runs on a private redis-server, or on the embedded memory:// backend with NRL_BACKEND=memory
// (whose keyspace lives in the child process: every check is made by one of its workers).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { startBackend } = require('./helpers/backend')

const ROOT = JSON.stringify(require.resolve('..'))
// Far above what the child needs (a few seconds); a hang is reported as such, not as a timeout
// of the test runner.
const CHILD_MS = 30_000

let backend

before(async () => {
  backend = await startBackend()
})

after(async () => {
  await backend?.close()
})

// The child's main thread: worker_threads only. Each round starts one worker running `body`
// (with `lock`, a DistributedLock, and `post`), waits for its first message, and either
// terminates it (`kill`) or lets it end by itself.
const CHILD = `
  const { Worker } = require('node:worker_threads')
  const { once } = require('node:events')
  const url = process.argv[1]
  const worker = (body) => new Worker(\`
    const { parentPort, workerData } = require('node:worker_threads')
    const { DistributedLock } = require(${ROOT})
    const lock = new DistributedLock(workerData)
    const post = (message) => parentPort.postMessage(message)
    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
    // Locked, polled for up to 2 s (a release of a terminated worker runs as it ends).
    const freed = async (key) => {
      for (let i = 0; i < 100; i++) { if (!(await lock.isLocked(key))) return true; await sleep(20) }
      return false
    }
    ;(async () => { \${body} })().catch((err) => post({ error: String(err?.stack ?? err) }))
  \`, { eval: true, workerData: url })
  async function round(body, kill) {
    const w = worker(body)
    const [message] = await once(w, 'message')
    if (kill) await w.terminate()
    else await once(w, 'exit')
    if (message?.error) throw new Error(message.error)
    return message
  }
  ;(async () => {
    const report = {}
    // The first worker holds a watched lock when it is terminated: its end releases it.
    await round(\`
      await lock.acquire('solo:first', 30000, { autoRefresh: true })
      setInterval(() => {}, 1000)
      post('holding')
    \`, true)
    // No environment uses the addon now. The next worker finds the first one's lock freed,
    // holds a 600 ms lock past several of its refreshes, and is terminated holding another.
    report.second = await round(\`
      const firstFreed = await freed('solo:first')
      // Once the refresh script is loaded, a watched lock may be won on this thread's own
      // connection, and its watchdog (stopped once it found nothing left to refresh) started
      // again from this thread.
      await (await lock.acquire('solo:warm', 300, { autoRefresh: true })).release()
      await sleep(400)
      const kept = await lock.acquire('solo:kept', 600, { autoRefresh: true })
      await sleep(1500)
      const stillHeld = await lock.isLocked('solo:kept')
      await kept.release()
      await lock.acquire('solo:second', 30000, { autoRefresh: true })
      setInterval(() => {}, 1000)
      post({ firstFreed, stillHeld })
    \`, true)
    // And again: a third worker, after the second was terminated.
    report.third = await round(\`
      const secondFreed = await freed('solo:second')
      const plain = await lock.acquire('solo:third', 30000)
      await plain.release()
      post({ secondFreed, released: !(await lock.isLocked('solo:third')) })
    \`, false)
    console.log(JSON.stringify(report))
  })().catch((err) => { console.error(err); process.exitCode = 2 })
`

/** Runs CHILD in a new process; resolves with its report, or fails on a hang or error. */
function runChild() {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', CHILD, backend.url], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (chunk) => (out += chunk))
    child.stderr.on('data', (chunk) => (err += chunk))
    const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_MS)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      if (code !== 0) return reject(new Error(`child ended with ${code ?? signal}: ${err}${out}`))
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()))
      } catch {
        reject(new Error(`child said: ${out}${err}`))
      }
    })
  })
}

test('with the package loaded only by workers, those started after all others ended still work, and free the locks of terminated ones', async () => {
  const report = await runChild()
  assert.deepEqual(report, {
    second: { firstFreed: true, stillHeld: true },
    third: { secondFreed: true, released: true },
  })
})
