'use strict'

// Promises of native calls, settled in batches: each call gets an id, the native side queues
// what finished, and one wake-up drains them all (see src/binding/completions.rs). While any
// call is pending the process stays alive, as it would for any pending I/O. Watchdog news for
// held locks (`refreshed`, `lost`) comes through the same queue, to listeners registered here
// by id.
const { NativeCompletions } = require('./native')
const { KeepAlive } = require('./liveness')

const pending = new Map()
const listeners = new Map()
const keepAlive = new KeepAlive()
let nextId = 1
let nextListener = 1

const completions = new NativeCompletions(() => {
  let thrown = null
  for (const entry of completions.drain()) {
    if (entry.listener !== undefined && entry.listener !== null) {
      // A listener that throws is the user's error, as with any EventEmitter; it must not
      // leave the rest of the batch unsettled, so it surfaces after the batch.
      try {
        listeners.get(entry.listener)?.(entry.event, entry.code ?? undefined, entry.message ?? undefined)
      } catch (err) {
        thrown ??= { err }
      }
      continue
    }
    const call = pending.get(entry.id)
    if (call === undefined) continue
    pending.delete(entry.id)
    if (entry.error !== undefined && entry.error !== null) call.reject(new Error(entry.error))
    else call.resolve(entry.handle ?? entry.value ?? entry.inspection ?? null)
  }
  if (pending.size === 0) keepAlive.set(false)
  if (thrown) throw thrown.err
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

/** Registers `fn(event, code, message)` for a held lock's news; returns the id to pass on. */
function listen(fn) {
  const id = nextListener
  nextListener = nextListener === 0xffffffff ? 1 : nextListener + 1
  listeners.set(id, fn)
  return id
}

function unlisten(id) {
  if (id !== undefined) listeners.delete(id)
}

module.exports = { completions, call, listen, unlisten }
