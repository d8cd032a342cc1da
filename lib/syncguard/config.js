'use strict'

// The default-filling helpers `syncguard/common` exports for custom backends. They read the
// exported default objects at each call, as lock() does, so an assignment to them counts.

const { BACKEND_DEFAULTS, LOCK_DEFAULTS } = require('./constants')

/** `{ ttlMs }` with BACKEND_DEFAULTS.ttlMs when `config.ttlMs` is null or undefined. */
function mergeBackendConfig(config) {
  return { ttlMs: config.ttlMs ?? BACKEND_DEFAULTS.ttlMs }
}

/** The five acquisition settings with LOCK_DEFAULTS filled in, and the signal as given. */
function mergeAcquisitionConfig(options) {
  return {
    maxRetries: options?.maxRetries ?? LOCK_DEFAULTS.maxRetries,
    retryDelayMs: options?.retryDelayMs ?? LOCK_DEFAULTS.retryDelayMs,
    timeoutMs: options?.timeoutMs ?? LOCK_DEFAULTS.timeoutMs,
    backoff: options?.backoff ?? LOCK_DEFAULTS.backoff,
    jitter: options?.jitter ?? LOCK_DEFAULTS.jitter,
    signal: options?.signal,
  }
}

module.exports = { mergeBackendConfig, mergeAcquisitionConfig }
