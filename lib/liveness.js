'use strict'

// Process liveness for held locks, shared by every instance in this JS thread:
// - a held ExclusiveLock (or DistributedLockService) keeps Node alive, as the original's
//   setInterval did: a native count, refered to Node like pending I/O; `unref()` opts out;
// - the native heartbeat is beaten while any lock has a stall guard, so the Rust watchdog
//   can tell a blocked event loop from a busy one: by a native timer of this thread's loop
//   (no JavaScript runs for it), or, should libuv not be found, by an unref'd JS timer.
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

/** One more (`+1`) or one fewer (`-1`) lock with a stall guard. */
function beating(delta) {
  if (heartbeat.hold(delta)) return
  if (delta < 0) {
    beaters--
    return
  }
  if (beaters++ === 0) heartbeat.beat()
  if (beatTimer === null) {
    beatTimer = setInterval(beat, BEAT_MS)
    beatTimer.unref()
  }
}

/** One lock's claim on the heartbeat; `set(true)` / `set(false)` are idempotent. */
class Beating {
  #on = false

  set(on) {
    if (on === this.#on) return
    this.#on = on
    beating(on ? 1 : -1)
  }
}

module.exports = { heartbeat, KeepAlive, Beating, beating }
