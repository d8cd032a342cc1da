'use strict'

/**
 * Starts measuring how late this thread's timers run: the time a loaded machine takes from
 * this process, which a bound on its reaction must allow on top of the reaction itself (a
 * quiet machine adds about nothing). Returns `stop()`, the lateness summed in ms.
 */
function lateness() {
  const STEP_MS = 5
  let late = 0
  let due = performance.now() + STEP_MS
  const behind = () => Math.max(0, performance.now() - due - 1) // timers are ms-grained
  let timer
  const tick = () => {
    late += behind()
    due = performance.now() + STEP_MS
    timer = setTimeout(tick, STEP_MS).unref()
  }
  timer = setTimeout(tick, STEP_MS).unref()
  return () => {
    clearTimeout(timer)
    return late + behind()
  }
}

module.exports = { lateness }
