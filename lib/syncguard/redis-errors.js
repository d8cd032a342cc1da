'use strict'

// Failures of a syncguard backend's calls as syncguard's LockError: ours (native errors) by
// their code, and anything else by the text of the error, by syncguard's rules.

const { LockError } = require('./errors')

/** A native failure (or anything else thrown) as syncguard's LockError, by code first. */
function toLockError(err) {
  if (err instanceof LockError) return err
  const text = err instanceof Error ? err.message : String(err)
  const make = (code, prefix) => new LockError(code, `${prefix}${text}`, { cause: err })
  switch (err?.code) {
    case 'ETIMEDOUT':
      return make('NetworkTimeout', 'Redis timeout: ')
    case 'ECONNECTION':
      return make('ServiceUnavailable', 'Redis connection error: ')
    case 'EAUTH':
    case 'ENOPERM':
      return make('AuthFailed', 'Redis authentication error: ')
    case 'EABORTED':
      return new LockError('Aborted', 'Operation aborted by signal', { cause: err })
    case 'EINVAL':
      return new LockError('InvalidArgument', text, { cause: err })
    case 'EREDIS':
      // Our message already says "Redis error: "; syncguard's rules read the server's text.
      return byServerText(err, text.replace(/^Redis error: /, ''))
    default:
      return make('Internal', 'Redis error: ')
  }
}

/** syncguard's reading of a Redis error's text, in its order. */
function byServerText(err, text) {
  const rules = [
    [['timeout'], 'NetworkTimeout', 'Redis timeout: '],
    [['ECONNRESET', 'ENOTFOUND', 'ECONNREFUSED'], 'ServiceUnavailable', 'Redis connection error: '],
    [['NOAUTH', 'WRONGPASS', 'NOPERM'], 'AuthFailed', 'Redis authentication error: '],
    [['WRONGTYPE', 'SYNTAX', 'INVALID'], 'InvalidArgument', 'Redis command error: '],
    [['SCRIPT_ERROR'], 'Internal', 'Redis script error: '],
  ]
  for (const [needles, code, prefix] of rules) {
    if (needles.some((needle) => text.includes(needle))) return new LockError(code, `${prefix}${text}`, { cause: err })
  }
  return new LockError('Internal', `Redis error: ${text}`, { cause: err })
}

module.exports = { toLockError, byServerText }
