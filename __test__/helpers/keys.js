'use strict'

// Where a lock's other keys live, as src/core/keys.rs lays them out, for tests that look at
// Redis directly. The separator is the byte 0xFF, which no UTF-8 text (so no lock key) holds.
const { keySlot } = require('../../lib/cli/key-slot')

const SEPARATOR = Buffer.from([0xff])

function hashTag(key) {
  const open = key.indexOf(0x7b) // {
  if (open < 0) return null
  const close = key.indexOf(0x7d, open + 1) // }
  return close > open + 1 ? key.subarray(open + 1, close) : null
}

/** The key beside `lockKey` (a string or Buffer) holding `suffix` ('fence', 'owner', ...). */
function siblingKey(lockKey, suffix) {
  const key = Buffer.from(lockKey)
  const tag = hashTag(key)
  const name = Buffer.from(suffix)
  if (tag === null && !key.includes(0x7d)) {
    return Buffer.concat([Buffer.from('{'), key, Buffer.from('}'), SEPARATOR, name])
  }
  if (tag === null) throw new Error('keys with a } but no tag get a computed tag: not needed by the tests')
  return Buffer.concat([Buffer.from('{'), tag, Buffer.from('}'), SEPARATOR, name, SEPARATOR, key])
}

const fenceKey = (lockKey) => siblingKey(lockKey, 'fence')
const ownerKey = (lockKey) => siblingKey(lockKey, 'owner')

/** The Redis Cluster hash slot of `key` (a string or Buffer), its hash tag honoured. */
const slot = keySlot

module.exports = { siblingKey, fenceKey, ownerKey, slot }
