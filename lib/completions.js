'use strict'

// The JS side of native promises (src/binding/promises.rs). Every native call returns a
// promise that the native side settles itself, in batches, from this thread's event loop;
// while any is pending the process stays alive, as it would for pending I/O. What this file
// supplies are the hooks a settlement needs: the error classes users match on, and the
// listeners that hear of held locks (`refreshed`, `lost`).
const { NativeCompletions } = require('./native')
const { fromNative } = require('./errors')

/** A method of objects that listen for their lock's news: `[EVENT](event, code, message)`. */
const EVENT = Symbol('event')
/** A method of a call's owner told that the call failed: `[FAILED](code)`. */
const FAILED = Symbol('failed')

const listeners = new Map()
let nextListener = 1

const completions = new NativeCompletions(performance.now())

completions.hook('error', (err, key, owner) => {
  const error = fromNative(err, key)
  owner?.[FAILED]?.(error.code)
  return error
})

// A listener that throws is the user's error, as with any EventEmitter: the native side
// finishes the batch, then raises it as an uncaught exception.
completions.hook('event', (listener, event, code, message, expiresAt) => {
  const target = listeners.get(listener)
  if (typeof target === 'function') target(event, code, message)
  else target?.[EVENT](event, code, message, expiresAt)
})

/**
 * Registers a held lock's listener: a function `(event, code, message)`, or an object with
 * an `[EVENT]` method. Returns the id to pass to the native call.
 */
function listen(target) {
  const id = nextListener
  nextListener = nextListener === 0xffffffff ? 1 : nextListener + 1
  listeners.set(id, target)
  return id
}

function unlisten(id) {
  if (id !== undefined && id !== 0) listeners.delete(id)
}

module.exports = { completions, listen, unlisten, EVENT, FAILED }
