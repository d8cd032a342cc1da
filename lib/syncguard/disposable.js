'use strict'

// syncguard's decoration of acquire results: a won lock becomes a handle with release(),
// extend() and [Symbol.asyncDispose]() (for `await using`), a lost one gets no-ops of the same
// names. A handle releases at most once, whichever of release() and disposal comes first.

/**
 * The handler used when none is given: logs a failed disposal unless NODE_ENV is "production"
 * (SYNCGUARD_DEBUG=true logs anyway). Both are read at each call. The key and lockId are left
 * out of the log on purpose: they may name users' data.
 */
function defaultOnReleaseError(error, context) {
  const log = process.env.NODE_ENV !== 'production' || process.env.SYNCGUARD_DEBUG === 'true'
  if (!log) return
  console.error('[SyncGuard] Lock disposal failed:', {
    error: error.message,
    errorName: error.name,
    source: context.source,
  })
}

/** Hands `error` (wrapped in an Error if it is not one) to `onReleaseError`, which may not throw. */
function report(onReleaseError, error, lockId, key) {
  try {
    let normalized = error
    if (!(error instanceof Error)) {
      normalized = new Error(String(error))
      normalized.originalError = error
    }
    onReleaseError(normalized, { lockId, key, source: 'disposal' })
  } catch {
    // A failing callback is the user's to handle; disposal itself never throws.
  }
}

/**
 * A release bounded by `timeoutMs`: resolves when the release succeeds or the time is up
 * (aborting the signal given to the release; a later release error is still reported), and
 * rejects with the release's error when it fails first.
 */
async function releaseWithin(backend, lockId, timeoutMs, onLateError) {
  const controller = new AbortController()
  // Never rejects: a release that throws, even synchronously, is an outcome like any other.
  const settled = (async () => {
    try {
      await backend.release({ lockId, signal: controller.signal })
      return { failed: false }
    } catch (error) {
      return { failed: true, error }
    }
  })()
  let timer
  const expired = new Promise((resolve) => {
    timer = setTimeout(() => {
      controller.abort()
      resolve(null)
    }, timeoutMs)
  })
  const outcome = await Promise.race([settled, expired])
  clearTimeout(timer)
  if (outcome === null) {
    settled.then((late) => late.failed && onLateError(late.error))
    return
  }
  if (outcome.failed) throw outcome.error
}

/** The handle of a won lock: `result`'s fields plus the three methods, on a new object. */
function createDisposableHandle(
  backend,
  result,
  key,
  onReleaseError = defaultOnReleaseError,
  disposeTimeoutMs,
) {
  // The lockId is read from `result` at each call, as syncguard does, not copied once.
  // 'active' until a release or disposal starts, 'disposing' while it runs, then 'disposed'.
  let state = 'active'
  let releasing = null // release() in flight: disposal waits for it
  let disposing = null // the first disposal: later ones wait for it
  const notify = (error) => report(onReleaseError, error, result.lockId, key)

  async function dispose() {
    try {
      if (typeof disposeTimeoutMs === 'number' && disposeTimeoutMs > 0) {
        await releaseWithin(backend, result.lockId, disposeTimeoutMs, notify)
      } else {
        await backend.release({ lockId: result.lockId })
      }
      state = 'disposed'
    } catch (error) {
      state = 'disposed'
      notify(error)
    }
  }

  const handle = {
    async release(signal) {
      if (state !== 'active') return { ok: false }
      state = 'disposing'
      let pending
      try {
        pending = backend.release({ lockId: result.lockId, signal })
      } catch (error) {
        state = 'disposed'
        throw error
      }
      const done = () => {
        state = 'disposed'
      }
      releasing = pending.then(done, done)
      // The caller gets the release's own result or error; only disposal swallows errors.
      return pending
    },

    async extend(ttlMs, signal) {
      // Extending again and again is legitimate, so no state check.
      return backend.extend({ lockId: result.lockId, ttlMs, signal })
    },

    async [Symbol.asyncDispose]() {
      if (state === 'disposed') return
      if (state === 'disposing') {
        if (releasing) {
          await releasing
          return
        }
        return disposing
      }
      state = 'disposing'
      disposing = dispose()
      return disposing
    },
  }
  return Object.assign({}, result, handle)
}

/**
 * `result` of `backend.acquire` with release/extend/dispose attached: for a lost acquisition the
 * same object gets no-ops answering `{ ok: false }`; a won one becomes a new handle object.
 */
function decorateAcquireResult(
  backend,
  result,
  key,
  onReleaseError = defaultOnReleaseError,
  disposeTimeoutMs,
) {
  if (result.ok) {
    return createDisposableHandle(backend, result, key, onReleaseError, disposeTimeoutMs)
  }
  result[Symbol.asyncDispose] = async () => {}
  result.release = async () => ({ ok: false })
  result.extend = async () => ({ ok: false })
  return result
}

/**
 * `backend.acquire(opts)`, checking that a won result is decorated: a backend (or a test
 * double) that forgot decorateAcquireResult fails here rather than at the first release.
 */
async function acquireHandle(backend, opts) {
  const result = await backend.acquire(opts)
  if (!result.ok) return result
  if (
    typeof result.release !== 'function' ||
    typeof result.extend !== 'function' ||
    typeof result[Symbol.asyncDispose] !== 'function'
  ) {
    throw new Error(
      'Backend.acquire() must return a decorated result. ' +
        'Use decorateAcquireResult() or implement LockBackend correctly.',
    )
  }
  return result
}

module.exports = {
  defaultOnReleaseError,
  report,
  createDisposableHandle,
  decorateAcquireResult,
  acquireHandle,
}
