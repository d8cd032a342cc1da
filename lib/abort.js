'use strict'

const { NativeCancel } = require('./native')

/**
 * Runs `operation(cancel)` with a native cancel token tied to `signal`. An abort stops the
 * native wait at once, and the promise rejects with `signal.reason`, as Node's own APIs do.
 */
async function withSignal(signal, operation) {
  if (signal === undefined) return operation(undefined)
  signal.throwIfAborted()
  const cancel = new NativeCancel()
  const onAbort = () => cancel.cancel()
  signal.addEventListener('abort', onAbort, { once: true })
  try {
    return await operation(cancel)
  } catch (err) {
    if (signal.aborted) throw signal.reason
    throw err
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}

module.exports = { withSignal }
