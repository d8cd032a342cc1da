'use strict'

// The soak's sampling schedule (scripts/soak/worker.js says what a sample reads): a sample
// begins with a full collection and what it left live, read at once, and ends SETTLE_MS later,
// once V8 has handed back to the system the pages the collection freed (on its own threads,
// after gc() returns: a soak parent's RSS read at once was up to 14.5 MB above the same read
// 20 ms later, and moved under 1 MB between 100 and 400 ms).

// How long after a sample's collection the rest of it is read.
const SETTLE_MS = 250

/**
 * Every `everyMs`, `begin()` (synchronous; answers what `finish` needs), then `finish(begun)`
 * `settleMs` later. A tick while a sample settles is skipped: two samples at once would each
 * read the other's collection. `onError(err)` gets what `begin` or `finish` throws. Answers
 * `stop()`, which stops the ticks and the settle under way (its timer cleared, its `finish`
 * never run, so no timer of the sampler outlives the run) and resolves once the sample under
 * way, if any, has returned.
 */
function startSampler({ everyMs, settleMs = SETTLE_MS, begin, finish, onError }) {
  let stopping = false
  let settling = null
  let underWay = null
  const take = async () => {
    const begun = begin()
    await new Promise((resolve) => {
      settling = { timer: setTimeout(resolve, settleMs), resolve }
    })
    settling = null
    if (!stopping) finish(begun)
  }
  const tick = () => {
    if (underWay) return
    underWay = take()
      .catch(onError)
      .finally(() => (underWay = null))
  }
  const timer = setInterval(tick, everyMs)
  return {
    stop() {
      stopping = true
      clearInterval(timer)
      if (settling) {
        clearTimeout(settling.timer)
        settling.resolve()
      }
      return underWay ?? Promise.resolve()
    },
  }
}

module.exports = { startSampler, SETTLE_MS }
