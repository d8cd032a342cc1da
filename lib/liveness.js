'use strict'

// Process liveness for auto-refreshed locks, shared by every instance in this JS thread:
// - one ref'd timer keeps Node alive while any held lock wants it (the original's interval
//   did this per lock); `unref()` opts a lock out;
// - one unref'd timer beats the native heartbeat while any lock has a stall guard, so the
//   Rust watchdog can tell a blocked event loop from a busy one.
const { NativeHeartbeat } = require('./native')

const heartbeat = new NativeHeartbeat()
const BEAT_MS = 100
// Long enough to never fire in practice, short enough for setInterval's 32-bit limit.
const KEEP_ALIVE_MS = 2 ** 30

let keepers = 0
let keepAliveTimer = null
let beaters = 0
let beatTimer = null

/** One lock's claim on keeping the process alive; `set(true)` / `set(false)` are idempotent. */
class KeepAlive {
  #on = false

  set(on) {
    if (on === this.#on) return
    this.#on = on
    if (on && keepers++ === 0) keepAliveTimer = setInterval(() => {}, KEEP_ALIVE_MS)
    if (!on && --keepers === 0) {
      clearInterval(keepAliveTimer)
      keepAliveTimer = null
    }
  }
}

/** One lock's claim on the heartbeat; `set` as above. */
class Beating {
  #on = false

  set(on) {
    if (on === this.#on) return
    this.#on = on
    if (on && beaters++ === 0) {
      heartbeat.beat()
      beatTimer = setInterval(() => heartbeat.beat(), BEAT_MS)
      beatTimer.unref()
    }
    if (!on && --beaters === 0) {
      clearInterval(beatTimer)
      beatTimer = null
    }
  }
}

module.exports = { heartbeat, KeepAlive, Beating }
