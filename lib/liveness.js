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

let beatTimer = null

// Held locks that keep this thread's process alive. The native side is told only when the
// count leaves or reaches zero: one call per busy period, not two per lock.
let kept = 0

/** Counts `delta`; the change the native side must apply: -1, 0 or 1. */
function count(delta) {
  const before = kept
  kept += delta
  return (before === 0) === (kept === 0) ? 0 : delta
}

function keep(delta) {
  if (count(delta) !== 0) completions.keepAlive(kept > 0)
}

/** One lock's claim on keeping the process alive; `set(true)` / `set(false)` are idempotent. */
class KeepAlive {
  #on = false

  set(on) {
    if (on === this.#on) return
    this.#on = on
    keep(on ? 1 : -1)
  }

  /**
   * As `set()`, for a caller about to cross into native anyway: instead of a call of its
   * own, the change the native side must apply is returned, for that call to carry. If the
   * call throws, `missed()` with the same change.
   */
  handOff(on) {
    if (on === this.#on) return 0
    this.#on = on
    return count(on ? 1 : -1)
  }
}

/** Applies changes handed off (`handOff`) to a native call that threw before applying them. */
function missed(keepChange, beatChange) {
  if (keepChange !== 0) completions.keepAlive(keepChange > 0)
  if (beatChange !== 0) heartbeat.hold(beatChange)
}

// Locks with a stall guard in this thread. The native timer is told only when the count
// leaves or reaches zero. Should it be unable to beat (libuv not found), a JS timer does,
// and it outlives the last beater by up to one period instead of being cleared and made
// again for every hold: cheap when locks are taken and released many times a second.
let guarded = 0
// Asked once: whether a native timer beats (it is made now); if not, the JS timer does.
let jsBeats = !heartbeat.hold(0)

function beat() {
  if (guarded === 0) {
    clearInterval(beatTimer)
    beatTimer = null
    return
  }
  heartbeat.beat()
}

/** One more (`+1`) or one fewer (`-1`) lock with a stall guard. */
function beating(delta) {
  const before = guarded
  guarded += delta
  if (!jsBeats) {
    if ((before === 0) === (guarded === 0) || heartbeat.hold(guarded > 0 ? 1 : -1)) return
    jsBeats = true
  }
  if (guarded === 0) return
  if (before === 0) heartbeat.beat()
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

  /** As `KeepAlive.handOff`. With no native timer the JS one is managed here, and 0 returned. */
  handOff(on) {
    if (on === this.#on) return 0
    this.#on = on
    const delta = on ? 1 : -1
    if (jsBeats) {
      beating(delta)
      return 0
    }
    const before = guarded
    guarded += delta
    return (before === 0) === (guarded === 0) ? 0 : delta
  }
}

module.exports = { heartbeat, KeepAlive, Beating, beating, missed }
