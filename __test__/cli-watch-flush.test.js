'use strict'

// The count of fences drawn in vain, which `watch` subtracts from a lock's counter growth to
// read acquisitions, survives a SCRIPT FLUSH: it is written behind an attempt's reply, a
// command whose own reply nobody reads, so a NOSCRIPT there would be lost silently and every
// failed attempt would read as an acquisition until the process reconnected.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { running, until } = require('./helpers/cli')
const { DistributedLock } = require('..')
const { lockSiblings } = require('../lib/native')

let redis
let admin

before(async () => {
  redis = await startRedis()
  admin = new Redis(redis.url)
})

after(async () => {
  admin.disconnect()
  await redis.stop()
})

function framesOf(run) {
  return run.output().split('\n').slice(0, -1).map((line) => JSON.parse(line))
}

/** A process of its own holding `keys` until killed: this one has never seen them held. */
async function holdIn(url, keys) {
  const script = `
    const { DistributedLock } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const lock = new DistributedLock(${JSON.stringify(url)})
    Promise.all(${JSON.stringify(keys)}.map((key) => lock.acquire(key, 60_000)))
      .then(() => { process.stdout.write('held\\n'); setInterval(() => {}, 60_000) })`
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      out += chunk
      if (out.includes('held')) resolve()
    })
    child.on('exit', (code) => reject(new Error(`the holder exited with ${code}`)))
  })
  return child
}

async function drawn(key) {
  const sib = lockSiblings(Buffer.from(key))
  const [fence, missed] = await Promise.all([admin.get(sib.fence), admin.get(sib.missed)])
  return { fence: Number(fence ?? 0), missed: Number(missed ?? 0) }
}

test('after a SCRIPT FLUSH, failed attempts are still counted as drawn in vain, and watch reads no acquisition', async () => {
  // Fresh keys: a lock this process found held lately is attempted by the script, which
  // draws nothing when it fails; a first attempt is the transaction, which draws two.
  const keys = ['flushed-1', 'flushed-2', 'flushed-3']
  const holder = await holdIn(redis.url, keys)
  const lock = new DistributedLock(redis.url)
  // The process's socket opened, its scripts loaded, before the flush.
  const warm = await lock.acquire('warm-up', 10_000)
  await warm.release()
  const run = running(['watch', 'lock:flushed-*', '--json', '--interval', '300', '--url', redis.url])
  try {
    await until(() => framesOf(run), (frames) => frames.length >= 1 && frames.at(-1).locks.length === keys.length)
    assert.equal(await admin.script('FLUSH'), 'OK')
    for (const key of keys) {
      const before = await drawn(`lock:${key}`)
      assert.equal(await lock.tryAcquire(key, 5_000), null)
      const deadline = Date.now() + 5_000
      // Written behind the attempt's reply, not waited for.
      while ((await drawn(`lock:${key}`)).missed < before.missed + 2) {
        assert.ok(Date.now() < deadline, `${key}: the fences drawn in vain were never counted`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      // Two drawn by the attempt, both in vain.
      assert.deepEqual(await drawn(`lock:${key}`), { fence: before.fence + 2, missed: before.missed + 2 })
    }
    const seen = framesOf(run).length
    await until(() => framesOf(run), (frames) => frames.length >= seen + 2)
  } finally {
    run.child.kill('SIGTERM')
    holder.kill('SIGKILL')
  }
  const { code, stdout, stderr } = await run.done
  assert.equal(code, 0, stderr)
  for (const frame of framesOf({ output: () => stdout }).slice(1)) {
    for (const row of frame.locks) assert.equal(row.acquisitionsPerSec, 0, stdout)
  }
})
