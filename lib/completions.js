'use strict'

// Promises of native calls, settled in batches: each call gets an id, the native side queues
// what finished, and one wake-up drains them all (see src/binding/completions.rs). While any
// call is pending the process stays alive, as it would for any pending I/O.
const { NativeCompletions } = require('./native')
const { KeepAlive } = require('./liveness')

const pending = new Map()
const keepAlive = new KeepAlive()
let nextId = 1

const completions = new NativeCompletions(() => {
  for (const { id, handle, value, error } of completions.drain()) {
    const call = pending.get(id)
    if (call === undefined) continue
    pending.delete(id)
    if (error !== undefined && error !== null) call.reject(new Error(error))
    else call.resolve(handle ?? value ?? null)
  }
  if (pending.size === 0) keepAlive.set(false)
})

/** Runs `start(id)` (a native call that settles through the queue) and returns its promise. */
function call(start) {
  const id = nextId
  nextId = nextId === 0xffffffff ? 1 : nextId + 1
  return new Promise((resolve, reject) => {
    try {
      start(id)
    } catch (err) {
      // Bad input: the native call threw before anything was queued.
      reject(err)
      return
    }
    pending.set(id, { resolve, reject })
    keepAlive.set(true)
  })
}

module.exports = { completions, call }
