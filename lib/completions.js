'use strict'

// The JS side of native promises (src/binding/js/thread.rs). Every native call returns a
// promise that the native side settles itself, in batches, from this thread's event loop;
// while any is pending the process stays alive, as it would for pending I/O. What this file
// supplies are the hooks a settlement needs: the error classes users match on, and the
// listeners that hear of held locks (`refreshed`, `lost`).
const { NativeCompletions } = require('./native')
const { settledError } = require('./errors')

/** A method of objects that listen for their lock's news: `[EVENT](event, code, message)`. */
const EVENT = Symbol('event')
/** A method of a call's owner told that the call failed: `[FAILED](code)`. */
const FAILED = Symbol('failed')

// In dense arrays with a free list: a slot is 16 bytes, a Map entry about 40, and a process
// may hold tens of thousands of auto-refreshed locks. An id is `slot * 256 + generation`: a
// slot reused for another listener gets another id, so news still on its way to the one
// before (lost while it was being released, say) is not told to the new one.
const listeners = [undefined]
const generations = [0]
const freeSlots = []

const completions = new NativeCompletions(performance.now())

// The native side ends this thread's waits and releases its kept-alive locks when its
// environment goes away (a terminated worker, the end of the main thread); `process.exit()`
// skips that cleanup, so it is done here, before the exit.
process.once('exit', () => completions.end())

completions.hook('error', (err, owner) => {
  const error = settledError(err)
  owner?.[FAILED]?.(error.code)
  return error
})

// A listener that throws is the user's error, as with any EventEmitter: the native side
// finishes the batch, then raises it as an uncaught exception.
/** Tells listener `listener` of `event` (called by the native side). */
function dispatch(listener, event, code, message, expiresAt, token) {
  const slot = Math.floor(listener / 256)
  if (generations[slot] !== listener % 256) return
  const target = listeners[slot]
  if (typeof target === 'function') target(event, code, message)
  else target?.[EVENT](event, code, message, expiresAt, token)
}

completions.hook('event', dispatch)

/**
 * Registers a held lock's listener: a function `(event, code, message)`, or an object with
 * an `[EVENT]` method. Returns the id to pass to the native call.
 */
function listen(target) {
  const slot = freeSlots.pop() ?? listeners.length
  const generation = ((generations[slot] ?? 0) + 1) % 256
  listeners[slot] = target
  generations[slot] = generation
  return slot * 256 + generation
}

function unlisten(id) {
  if (typeof id !== 'number' || id <= 0) return
  const slot = Math.floor(id / 256)
  if (generations[slot] !== id % 256 || listeners[slot] === undefined) return
  listeners[slot] = undefined
  freeSlots.push(slot)
}

module.exports = { completions, listen, unlisten, dispatch, EVENT, FAILED }
