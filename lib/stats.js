'use strict'

// `stats()` of every API object: the native counters (src/core/basics/stats.rs), reshaped.

/** What an object that counts nothing (a JS-only transport) answers. */
const NONE = { enabled: false, acquisitions: 0, contended: 0, woken: 0, handedOver: 0, refreshes: 0, lost: 0, errors: [], waitP50Ms: 0, waitP99Ms: 0, waitMaxMs: 0 }

/**
 * `native.stats()` as users read it: `errors` an object of code → count (only the codes
 * seen), wait times in ms. `native` may be null (nothing of ours counts there): all zero.
 */
function statsOf(native) {
  const s = typeof native?.stats === 'function' ? native.stats() : NONE
  const errors = {}
  for (const { code, count } of s.errors) errors[code] = count
  return {
    enabled: s.enabled,
    acquisitions: s.acquisitions,
    contended: s.contended,
    woken: s.woken,
    handedOver: s.handedOver,
    refreshes: s.refreshes,
    lost: s.lost,
    errors,
    waitMs: { p50: s.waitP50Ms, p99: s.waitP99Ms, max: s.waitMaxMs },
  }
}

module.exports = { statsOf }
