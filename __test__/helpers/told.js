'use strict'

// Notices a test waits for with a bound: when a holder is told (onLost, an 'error' event),
// and whether it was told at all within some time.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A promise of the first call of the returned function, and when it came. */
function told() {
  let tell
  const seen = new Promise((resolve) => {
    tell = (value) => resolve({ value, at: Date.now() })
  })
  return [seen, tell]
}

/** `seen` if it comes within `ms`, else null. */
const within = (seen, ms) => Promise.race([seen, sleep(ms).then(() => null)])

module.exports = { told, within }
