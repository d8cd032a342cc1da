'use strict'

// Process liveness for held locks, shared by every instance in this JS thread:
// - a held ExclusiveLock (or DistributedLockService) keeps Node alive, as the original's
//   setInterval did: a native count, refered to Node like pending I/O; `unref()` opts out;
// - one unref'd timer beats the native heartbeat while any lock has a stall guard, so the
//   Rust watchdog can tell a blocked event loop from a busy one.
const { NativeHeartbeat } = require('./native')
const { completions } = require('./completions')

const heartbeat = new NativeHeartbeat()
const BEAT_MS = 100

let beaters = 0
let beatTimer = null

/** One lock's claim on keeping the process alive; `set(true)` / `set(false)` are idempotent. */
class KeepAlive {
  #on = false

  set(on) {
    if (on === this.#on) return
    this.#on = on
    completions.keepAlive(on)
  }
}

// The timer outlives the last beater by up to one period instead of being cleared and made
// again for every hold: cheap when locks are taken and released many times a second.
function beat() {
  if (beaters === 0) {
    clearInterval(beatTimer)
    beatTimer = null
    return
  }
  heartbeat.beat()
}

/** One lock's claim on the heartbeat; `set` as above. */
class Beating {
  #on = false

  set(on) {
    if (on === this.#on) return
    this.#on = on
    if (!on) {
      beaters--
      return
    }
    if (beaters++ === 0) heartbeat.beat()
    if (beatTimer === null) {
      beatTimer = setInterval(beat, BEAT_MS)
      beatTimer.unref()
    }
  }
}

module.exports = { heartbeat, KeepAlive, Beating }
