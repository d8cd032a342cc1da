'use strict'

/**
 * syncguard's error: `code` says what went wrong (ServiceUnavailable, AuthFailed,
 * InvalidArgument, RateLimited, NetworkTimeout, AcquisitionTimeout, Aborted, Internal),
 * `context` holds `{ key?, lockId?, cause? }`. Not the package's root LockError: syncguard's
 * constructor takes the code first. Own keys come in syncguard's order, `code`, `context` (even
 * when undefined), `name`, because code that logs or compares `Object.keys` sees them.
 */
class LockError extends Error {
  constructor(code, message, context) {
    super(message ?? code)
    this.code = code
    this.context = context
    this.name = 'LockError'
  }
}

module.exports = { LockError }
