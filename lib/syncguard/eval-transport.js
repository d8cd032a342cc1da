'use strict'

// syncguard's backend on an object that has only `eval` (syncguard's test mocks do this):
// the user's `eval` carries our scripts, as syncguard's fallback carries its own. The core
// says, per call, which script to send with which keys and args, and what the reply means
// (the bare codes of syncguard's mocks included); here we only ferry them, each call bounded.

const { NativeSyncguardEval } = require('../native')
const { LockError } = require('./errors')
const { byServerText } = require('./redis-errors')

/** Whether `redis` is an object we can only reach through its `eval`. */
function evalOnly(redis) {
  return redis !== null && typeof redis === 'object' && typeof redis.eval === 'function'
}

/** A reply of `eval` tagged for the core: an integer, a text, an array, or something else. */
function tagged(reply) {
  if (reply === null || reply === undefined) return {}
  if (typeof reply === 'number' && Number.isInteger(reply)) return { int: reply }
  if (typeof reply === 'string') return { bulk: reply }
  if (Buffer.isBuffer(reply)) return { bulk: reply.toString('utf8') }
  if (Array.isArray(reply)) return { items: reply.map(tagged) }
  return { other: String(reply) }
}

/**
 * The transport of one backend: the same calls as NativeSyncguard's (acquire, release,
 * extend, isLocked, lookupByKey, lookupById), answered alike, through `redis.eval`.
 */
function evalTransport(redis, settings) {
  const codec = new NativeSyncguardEval(settings)
  const timeoutMs = settings.commandTimeoutMs ?? 5000

  /**
   * `redis.eval` of `call`, failing with NetworkTimeout past the bound; a reply that comes
   * after that goes to `answeredLate` (tagged), if given.
   */
  async function send(call, answeredLate) {
    let timer
    let timedOut = false
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true
        reject(new LockError('NetworkTimeout', `Redis timeout: eval did not answer within ${timeoutMs} ms`))
      }, timeoutMs)
    })
    const sent = Promise.resolve().then(() => redis.eval(call.script, call.keys.length, ...call.keys, ...call.args))
    try {
      return tagged(await Promise.race([sent, late]))
    } catch (err) {
      if (timedOut && answeredLate) sent.then((reply) => answeredLate(tagged(reply)), () => {})
      if (err instanceof LockError) throw err
      throw byServerText(err, err instanceof Error ? err.message : String(err))
    } finally {
      clearTimeout(timer)
    }
  }

  /** Sends what the core says a late reply to an acquire of `keys` leads to (a release). */
  function afterLateAcquire(keys, ttlMs) {
    return (reply) => {
      let release = null
      try {
        release = codec.lateAcquired(keys, ttlMs, reply)
      } catch {
        return
      }
      if (release) send(release).catch(() => {})
    }
  }

  return {
    async acquire(keys, ttlMs) {
      const reply = await send(codec.acquire(keys, ttlMs), afterLateAcquire(keys, ttlMs))
      return codec.acquired(keys, ttlMs, reply)
    },
    async release(indexKey, lockId) {
      return codec.released(indexKey, lockId, await send(codec.release(indexKey, lockId)))
    },
    async extend(indexKey, lockId, ttlMs) {
      return codec.extended(indexKey, lockId, ttlMs, await send(codec.extend(indexKey, lockId, ttlMs)))
    },
    async isLocked(lockKey) {
      return codec.isLockedReply(lockKey, await send(codec.isLocked(lockKey)))
    },
    async lookupByKey(lockKey) {
      return codec.lookedUpByKey(lockKey, await send(codec.lookupByKey(lockKey)))
    },
    async lookupById(indexKey, lockId) {
      return codec.lookedUpById(indexKey, lockId, await send(codec.lookupById(indexKey, lockId)))
    },
  }
}

module.exports = { evalOnly, evalTransport }
