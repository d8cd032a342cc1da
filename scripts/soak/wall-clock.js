'use strict'

// Steps of the wall clock against the monotonic one, seen from the parent while the soak runs.
// Redis counts every PX on its wall clock, while our holders count their leases on the
// monotonic one: a step forward of the server's clock ends every lease shorter than the step
// at once, with no holder told until its next refresh (README, restart quarantine, "Not
// guaranteed"). The clock is the machine's, so one process watching is enough.
const { clock } = require('./tally')

// Date.now() is whole milliseconds: its difference to clock() moves by up to 1 ms on its own.
const STEP_MS = 5
const EVERY_MS = 50

/**
 * The wall clock's lead over clock(), or undefined when this process was descheduled between
 * the readings (on a loaded machine a pause there reads as a step, and the next as one back).
 */
function offset() {
  const before = clock()
  const wall = Date.now()
  const after = clock()
  return after - before < 1 ? wall - (before + after) / 2 : undefined
}

/** Starts watching; `stop()` ends it and answers the steps seen, `{ at, ms }` (at: clock()). */
function watchWallClock() {
  const steps = []
  let last = offset()
  const timer = setInterval(() => {
    const now = offset()
    if (now === undefined) return
    if (last !== undefined && Math.abs(now - last) >= STEP_MS) steps.push({ at: clock(), ms: now - last })
    last = now
  }, EVERY_MS)
  return {
    steps,
    stop() {
      clearInterval(timer)
      return steps
    },
  }
}

module.exports = { watchWallClock, STEP_MS }
