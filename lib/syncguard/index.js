'use strict'

// Everything `native-redis-lock/syncguard` exports: syncguard's root exports, plus
// createRedisBackend and createLock (which syncguard keeps in `syncguard/redis`).

const constants = require('./constants')
const { LockError } = require('./errors')
const { normalizeAndValidateKey, validateLockId } = require('./validation')
const { generateLockId, hashKey, makeStorageKey } = require('./keys')
const { TIME_TOLERANCE_MS, isLive, calculateRedisServerTimeMs } = require('./time')
const helpers = require('./helpers')
const { acquireHandle, decorateAcquireResult } = require('./disposable')
const { withTelemetry } = require('./telemetry')
const { createRedisBackend } = require('./backend')
const { lock, createLock } = require('./lock')

module.exports = {
  lock,
  LockError,
  normalizeAndValidateKey,
  validateLockId,
  generateLockId,
  hashKey,
  makeStorageKey,
  getByKey: helpers.getByKey,
  getById: helpers.getById,
  getByKeyRaw: helpers.getByKeyRaw,
  getByIdRaw: helpers.getByIdRaw,
  owns: helpers.owns,
  hasFence: helpers.hasFence,
  sanitizeLockInfo: helpers.sanitizeLockInfo,
  withTelemetry,
  acquireHandle,
  decorateAcquireResult,
  isLive,
  calculateRedisServerTimeMs,
  TIME_TOLERANCE_MS,
  LOCK_DEFAULTS: constants.LOCK_DEFAULTS,
  BACKEND_DEFAULTS: constants.BACKEND_DEFAULTS,
  BACKEND_LIMITS: constants.BACKEND_LIMITS,
  FENCE_THRESHOLDS: constants.FENCE_THRESHOLDS,
  MAX_KEY_LENGTH_BYTES: constants.MAX_KEY_LENGTH_BYTES,
  RESERVE_BYTES: constants.RESERVE_BYTES,
  createRedisBackend,
  createLock,
}
