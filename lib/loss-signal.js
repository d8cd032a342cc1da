'use strict'

const { LockLostError } = require('./errors')

// A timer never fires sooner than this after the last look: the wall clock that says when to
// look may run ahead of the monotonic one that decides.
const MIN_LOOK_MS = 10

/**
 * The AbortSignal `using` hands its `fn`: aborted, with a LockLostError as its reason, once
 * `handle`'s lock is lost while `fn` runs: when the watchdog reports it (`autoRefresh`), or
 * else once its TTL ran out (an `extend()` meanwhile moves that). `gone()` says whether the
 * lock ended without being released. `stop()` ends the watch and returns the loss, if any.
 */
function lossSignal(handle, autoRefresh, gone) {
  const controller = new AbortController()
  let stopped = false
  let timer = null
  const abort = (error) => {
    if (!stopped && !controller.signal.aborted) controller.abort(error)
  }
  // A plain lock whose connection dropped (in doubt) can no longer be vouched for either.
  const expired = () =>
    new LockLostError(
      handle.key,
      handle.suspended
        ? `Lock "${handle.key}" was lost: its connection to Redis dropped and nothing confirmed it since`
        : `Lock "${handle.key}" was lost: its TTL ran out`,
    )
  if (autoRefresh) {
    handle.lost.then(abort)
  } else {
    const look = () => {
      timer = null
      if (stopped) return
      if (handle.isHeld) return later()
      // Released by `fn` itself is no loss.
      if (gone()) abort(expired())
    }
    const later = () => {
      const wait = Math.max(MIN_LOOK_MS, handle.info.expiresAt - Date.now() + 1)
      timer = setTimeout(look, Math.min(wait, 2 ** 31 - 1))
      timer.unref()
    }
    later()
  }
  return {
    signal: controller.signal,
    stop() {
      if (timer !== null) clearTimeout(timer)
      if (!controller.signal.aborted && gone()) abort(autoRefresh ? new LockLostError(handle.key) : expired())
      stopped = true
      return controller.signal.aborted ? controller.signal.reason : null
    },
  }
}

module.exports = { lossSignal }
