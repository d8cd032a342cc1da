'use strict'

// Told before anyone else can take it: Redis SIGKILLed and restarted empty while 3 holders
// (other processes, autoRefresh) hold their keys and 3 contenders (other processes) wait for
// them. Every holder must be told (`onSuspended`) before any contender acquires: the double
// hold, max(0, told_i - acquired_j) over every pair of a trial, is 0 in each of 20 trials.
// Times come from each process's `performance.timeOrigin + performance.now()`.
const path = require('node:path')
const { fork } = require('node:child_process')
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../helpers/redis-server')

const TRIALS = 20
const PARTIES = 3
const STEP_BOUND_MS = 10_000

let server
const holders = []
const contenders = []

/** A party process; its messages are kept, and waited for by `next`. */
function party(role) {
  const proc = fork(path.join(__dirname, '../fixtures/doubt-party.js'), [role, server.url], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const p = { proc, messages: [], waiters: [] }
  proc.on('message', (message) => {
    p.messages.push(message)
    for (const waiter of [...p.waiters]) waiter()
  })
  proc.on('exit', () => {
    for (const waiter of [...p.waiters]) waiter()
  })
  return p
}

/** The first message of `p` matching `match`, waited for up to STEP_BOUND_MS. */
function next(p, match, what) {
  return new Promise((resolve, reject) => {
    const check = () => {
      const found = p.messages.find(match)
      if (found) return done(() => resolve(found))
      const failed = p.messages.find((m) => m.event === 'failed')
      if (failed) return done(() => reject(new Error(`${what}: ${failed.message}`)))
      if (p.proc.exitCode !== null || p.proc.signalCode !== null) return done(() => reject(new Error(`${what}: the party exited`)))
    }
    const timer = setTimeout(() => done(() => reject(new Error(`${what}: not within ${STEP_BOUND_MS} ms`))), STEP_BOUND_MS)
    const done = (then) => {
      clearTimeout(timer)
      p.waiters.splice(p.waiters.indexOf(check), 1)
      then()
    }
    p.waiters.push(check)
    check()
  })
}

const event = (name, trial) => (m) => m.event === name && m.trial === trial

before(async () => {
  server = await startRedis()
  for (let i = 0; i < PARTIES; i++) {
    holders.push(party('holder'))
    contenders.push(party('contender'))
  }
  await Promise.all([...holders, ...contenders].map((p) => next(p, (m) => m.event === 'ready', 'ready')))
})

after(async () => {
  for (const p of [...holders, ...contenders]) {
    if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL')
  }
  await server?.close()
})

test(`a Redis SIGKILLed and restarted empty: every holder is told before any contender acquires, ${TRIALS} trials`, async (t) => {
  const worst = []
  for (let trial = 0; trial < TRIALS; trial++) {
    const keys = holders.map((_, i) => `doubt:${trial}:${i}`)
    holders.forEach((p, i) => p.proc.send({ command: 'hold', trial, key: keys[i] }))
    await Promise.all(holders.map((p) => next(p, event('held', trial), `trial ${trial} held`)))
    contenders.forEach((p, i) => p.proc.send({ command: 'contend', trial, key: keys[i] }))
    await Promise.all(contenders.map((p) => next(p, event('waiting', trial), `trial ${trial} waiting`)))
    // Into their waits (a first attempt found each key held).
    await new Promise((resolve) => setTimeout(resolve, 20))

    await server.kill()
    await server.start()

    const told = await Promise.all(holders.map((p) => next(p, event('suspended', trial), `trial ${trial} holder told`)))
    const won = await Promise.all(contenders.map((p) => next(p, event('acquired', trial), `trial ${trial} contender acquired`)))
    await Promise.all(holders.map((p) => next(p, event('lost', trial), `trial ${trial} holder lost`)))
    for (const p of holders) {
      assert.equal(p.messages.some(event('resumed', trial)), false, `trial ${trial}: a lock gone in the restart never resumes`)
    }
    let doubleHold = 0
    for (const { at: toldAt } of told) {
      for (const { at: acquiredAt } of won) doubleHold = Math.max(doubleHold, toldAt - acquiredAt)
    }
    const margin = Math.min(...won.map((w) => w.at)) - Math.max(...told.map((x) => x.at))
    worst.push(margin)
    assert.equal(doubleHold, 0, `trial ${trial}: a holder was told ${doubleHold.toFixed(2)} ms after a contender acquired`)

    for (const p of [...holders, ...contenders]) p.proc.send({ command: 'drop', trial })
    await Promise.all([...holders, ...contenders].map((p) => next(p, event('dropped', trial), `trial ${trial} dropped`)))
  }
  t.diagnostic(`doubleHoldMs 0 in ${TRIALS}/${TRIALS}; smallest margin (first acquisition - last told) ${Math.min(...worst).toFixed(2)} ms`)
})
