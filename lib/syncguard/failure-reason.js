'use strict'

/**
 * Why a release or extend failed ("expired" or "not-found"), kept on the `{ ok: false }`
 * result under a symbol of this module so that only withTelemetry reads it: the public result
 * stays `{ ok: false }`. Private, like syncguard's: neither package reads the other's.
 */
const FAILURE_REASON = Symbol('failureReason')

/** `{ ok: false }` carrying `reason` for telemetry. */
function failedWith(reason) {
  const result = { ok: false }
  result[FAILURE_REASON] = { reason }
  return result
}

module.exports = { FAILURE_REASON, failedWith }
