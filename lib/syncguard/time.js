'use strict'

/** Clock skew every syncguard backend tolerates when deciding whether a lock is live. */
const TIME_TOLERANCE_MS = 1000

/** Whether a lock expiring at `expiresAtMs` still counts as held at `nowMs`. */
function isLive(expiresAtMs, nowMs, toleranceMs) {
  return expiresAtMs > nowMs - toleranceMs
}

/** Redis `TIME` (`[seconds, microseconds]`, as strings) in whole milliseconds. */
function calculateRedisServerTimeMs(redisTime) {
  return parseInt(redisTime[0]) * 1000 + Math.floor(parseInt(redisTime[1]) / 1000)
}

module.exports = { TIME_TOLERANCE_MS, isLive, calculateRedisServerTimeMs }
