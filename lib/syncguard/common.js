'use strict'

// Everything `native-redis-lock/syncguard/common` exports, as `syncguard/common` does: the
// root's helpers and constants (not createRedisBackend or createLock, which are Redis's), and
// the pieces a custom backend is built from (formatFence, attachRawData, checkAborted, the
// default mergers, the outcome mappers, createDisposableHandle, createAutoLock).

const root = require('./index')
const { formatFence } = require('./keys')
const { attachRawData, logFenceWarning, checkAborted, delay } = require('./helpers')
const { createDisposableHandle } = require('./disposable')
const { createAutoLock } = require('./lock')
const { mergeBackendConfig, mergeAcquisitionConfig } = require('./config')
const semantics = require('./backend-semantics')

const { createRedisBackend, createLock, ...shared } = root

module.exports = {
  ...shared,
  createAutoLock,
  formatFence,
  attachRawData,
  logFenceWarning,
  checkAborted,
  delay,
  createDisposableHandle,
  mergeBackendConfig,
  mergeAcquisitionConfig,
  FAILURE_REASON: semantics.FAILURE_REASON,
  mapToMutationResult: semantics.mapToMutationResult,
  mapRedisScriptResult: semantics.mapRedisScriptResult,
  mapFirestoreConditions: semantics.mapFirestoreConditions,
  mapBackendObservation: semantics.mapBackendObservation,
}
