'use strict'

// The parties of the restart fault tests (restart-doubt, restart-quarantine): processes of
// `fixtures/doubt-party.js` driven over IPC, their messages kept and waited for.
const path = require('node:path')
const { fork } = require('node:child_process')

const STEP_BOUND_MS = 10_000

/** A party process (`holder` or `contender`) on `url`, with the lock's `options` (JSON). */
function party(role, url, options = {}) {
  const proc = fork(path.join(__dirname, '../fixtures/doubt-party.js'), [role, url, JSON.stringify(options)], {
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

/** Stops every party still running, by its pid. */
function stopAll(parties) {
  for (const p of parties) {
    if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL')
  }
}

module.exports = { party, next, event, stopAll }
