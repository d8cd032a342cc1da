'use strict'

// syncguard's mapping from what a backend observed on a release or extend to the public
// result, exported by `syncguard/common` for custom backends. Anything ambiguous becomes
// "not-found": a caller is never told "expired" unless the expiry was seen.

const { FAILURE_REASON } = require('./failure-reason')

/** The public result of a mutation condition: `{ ok: true }` or `{ ok: false, reason }`. */
function mapToMutationResult(condition) {
  if (condition === 'succeeded') return { ok: true }
  if (condition === 'observable-expired') return { ok: false, reason: 'expired' }
  return { ok: false, reason: 'not-found' }
}

// The codes syncguard's release and extend scripts answer.
const SCRIPT_CODES = new Map([
  [1, 'succeeded'],
  [-2, 'observable-expired'],
  [-1, 'never-existed'],
  [0, 'ownership-mismatch'],
])

/** The condition a Redis script's reply code stands for; an unknown code is ambiguous. */
function mapRedisScriptResult(code) {
  return SCRIPT_CODES.get(code) ?? 'ambiguous-unknown'
}

/** The condition of a document-store read: absent, someone else's, expired, or ours. */
function mapFirestoreConditions({ documentExists, ownershipValid, isLive }) {
  if (!documentExists) return 'never-existed'
  if (!ownershipValid) return 'ownership-mismatch'
  if (!isLive) return 'observable-expired'
  return 'succeeded'
}

/** Either of the two above, by the observation's type (a number is a Redis code). */
function mapBackendObservation(observation) {
  return typeof observation === 'number'
    ? mapRedisScriptResult(observation)
    : mapFirestoreConditions(observation)
}

module.exports = {
  FAILURE_REASON,
  mapToMutationResult,
  mapRedisScriptResult,
  mapFirestoreConditions,
  mapBackendObservation,
}
