'use strict'

// Type checks only: JavaScript types are known here, value rules (empty keys, TTL ranges)
// live in the Rust core so every API shares them.
const { invalidArgument } = require('./errors')

function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'number' || typeof value === 'bigint') return `${typeof value} ${String(value)}`
  return `type ${typeof value}`
}

function string(value, name) {
  if (typeof value !== 'string') {
    throw invalidArgument(TypeError, name, `${name} must be a non-empty string, got ${describe(value)}`)
  }
  return value
}

function number(value, name) {
  if (typeof value !== 'number') {
    throw invalidArgument(TypeError, name, `${name} must be a number, got ${describe(value)}`)
  }
  return value
}

function optionalNumber(value, name) {
  return value === undefined ? undefined : number(value, name)
}

function optionalString(value, name) {
  return value === undefined ? undefined : string(value, name)
}

function object(value, name) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidArgument(TypeError, name, `${name} must be an object, got ${describe(value)}`)
  }
  return value
}

function optionalObject(value, name) {
  return value === undefined ? {} : object(value, name)
}

function optionalFunction(value, name) {
  if (value !== undefined && typeof value !== 'function') {
    throw invalidArgument(TypeError, name, `${name} must be a function, got ${describe(value)}`)
  }
  return value
}

function optionalBoolean(value, name) {
  if (value !== undefined && typeof value !== 'boolean') {
    throw invalidArgument(TypeError, name, `${name} must be a boolean, got ${describe(value)}`)
  }
  return value
}

function optionalSignal(value, name) {
  if (value === undefined) return undefined
  if (!(value instanceof AbortSignal)) {
    throw invalidArgument(TypeError, name, `${name} must be an AbortSignal, got ${describe(value)}`)
  }
  return value
}

// The name of a memory:// keyspace: the same rule, and the same way of showing a refused
// name, as the native side applies to a memory:// URL (src/core/backend/endpoint.rs).
const MEMORY_NAME = /^[A-Za-z0-9._-]*$/
const ESCAPES = { '\t': '\\t', '\r': '\\r', '\n': '\\n', "'": "\\'", '"': '\\"', '\\': '\\\\' }

function shownMemoryName(name) {
  if (name.includes('@')) return "a name with '@' (not repeated: it may hold credentials)"
  const chars = [...name].map((c) => {
    if (ESCAPES[c]) return ESCAPES[c]
    const code = c.codePointAt(0)
    return code >= 0x20 && code < 0x7f ? c : `\\u{${code.toString(16)}}`
  })
  const escaped = chars.join('')
  return escaped.length > 64 ? `'${escaped.slice(0, 64)}'...` : `'${escaped}'`
}

function memoryName(value, name) {
  if (typeof value !== 'string') {
    throw invalidArgument(TypeError, name, `${name} must be a string, got ${describe(value)}`)
  }
  if (!MEMORY_NAME.test(value)) {
    throw invalidArgument(
      TypeError,
      name,
      `${name} must be made of ASCII letters, digits, '-', '_' or '.'; got ${shownMemoryName(value)}`,
    )
  }
  return value
}

// Node's timer limit, as the core's `validate::MAX_MS`.
const MAX_MS = 2_147_483_647

/**
 * A whole number of ms from 0 (`restartQuarantineMs`): checked here, not natively, because
 * each API names it its own way (`options.restartQuarantineMs`, `restart_quarantine_ms`).
 */
function optionalWholeMs(value, name) {
  if (value === undefined) return undefined
  number(value, name)
  if (!Number.isInteger(value) || value < 0 || value > MAX_MS) {
    throw invalidArgument(RangeError, name, `${name} must be a whole number of milliseconds from 0 to ${MAX_MS}, got ${String(value)}`)
  }
  return value
}

module.exports = {
  optionalWholeMs,
  describe,
  memoryName,
  string,
  number,
  optionalNumber,
  optionalString,
  object,
  optionalObject,
  optionalFunction,
  optionalBoolean,
  optionalSignal,
}
