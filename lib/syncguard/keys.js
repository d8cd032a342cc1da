'use strict'

// Key derivations syncguard exports. They must give syncguard's bytes exactly: a process of
// ours and one of syncguard's locking one key have to name the same Redis keys.

const { createHash, randomFillSync } = require('node:crypto')
const { LockError } = require('./errors')

const utf8 = new TextEncoder()

/** Base64url without padding, the form of lockIds and hashed storage keys. */
function base64url(bytes) {
  return Buffer.from(bytes).toString('base64url')
}

// Lock ids are drawn from a pool of CSPRNG bytes, each byte used once: one call into the OS
// per 256 ids instead of one per id (randomBytes' own cost was a fifth of an acquire's JS
// time), as Node's randomUUID caches its entropy.
const ID_BYTES = 16
const pool = Buffer.allocUnsafeSlow(ID_BYTES * 256)
let drawn = pool.length

/** A fresh lock id: 16 random bytes as 22 base64url characters. */
function generateLockId() {
  if (drawn === pool.length) {
    randomFillSync(pool)
    drawn = 0
  }
  const id = pool.toString('base64url', drawn, drawn + ID_BYTES)
  drawn += ID_BYTES
  return id
}

/** `n` (an int32) as 8 lower-case hex digits of its unsigned value. */
function hex32(n) {
  return (n >>> 0).toString(16).padStart(8, '0')
}

/**
 * A 24-hex-digit fingerprint of `value` for logs and telemetry (not a secure hash): the NFC
 * form's UTF-16 code units folded into three 32-bit rolling hashes with multipliers 31, 127
 * and 2047 and weights 1, 3 and 7.
 */
function hashKey(value) {
  const text = value.normalize('NFC')
  let a = 0
  let b = 0
  let c = 0
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    a = ((a << 5) - a + unit) | 0
    b = ((b << 7) - b + unit * 3) | 0
    c = ((c << 11) - c + unit * 7) | 0
  }
  return hex32(a) + hex32(b) + hex32(c)
}

/**
 * The Redis (or other backend) key for `key` under `prefix`: `prefix:key` while it leaves
 * `reserveBytes` free under `limitBytes`, else the prefix and the first 16 bytes of the
 * SHA-256 of `prefix:key` in base64url. Trailing colons of the prefix are dropped. Throws
 * InvalidArgument when the prefix alone leaves no room.
 */
function makeStorageKey(prefix, key, limitBytes, reserveBytes) {
  if (!key) throw new LockError('InvalidArgument', 'Key must not be empty')
  const normalized = key.normalize('NFC')
  let base = prefix
  while (base.endsWith(':')) base = base.slice(0, -1)
  const separatorBytes = base ? 1 : 0
  if (utf8.encode(base).byteLength + separatorBytes + reserveBytes > limitBytes) {
    throw new LockError(
      'InvalidArgument',
      'Prefix exceeds backend limit after accounting for reserved bytes. Use a shorter prefix.',
    )
  }
  const joined = base ? `${base}:${normalized}` : normalized
  const joinedBytes = utf8.encode(joined)
  if (joinedBytes.byteLength + reserveBytes <= limitBytes) return joined

  const digest = createHash('sha256').update(joinedBytes).digest().subarray(0, 16)
  const hashed = base ? `${base}:${base64url(digest)}` : base64url(digest)
  if (utf8.encode(hashed).byteLength + reserveBytes > limitBytes) {
    throw new LockError(
      'InvalidArgument',
      'Key exceeds backend limits even after hashing (prefix too long).',
    )
  }
  return hashed
}

/**
 * A fence counter as the 15-digit zero-padded text backends store and return, so that fences
 * compare as strings. A number is truncated first; negative or 16-digit values are refused,
 * since Lua's doubles stay exact only up to 2^53.
 */
function formatFence(value) {
  const n = typeof value === 'number' ? BigInt(Math.trunc(value)) : value
  if (n < 0n) throw new LockError('InvalidArgument', 'Fence must be non-negative')
  if (n > 999_999_999_999_999n) {
    throw new LockError('InvalidArgument', `Fence exceeds 15-digit limit: ${n}`)
  }
  return n.toString().padStart(15, '0')
}

module.exports = { generateLockId, hashKey, makeStorageKey, formatFence }
