'use strict'

// The Redis Cluster hash slot of a key, as Redis computes it (and src/core/basics/keys.rs
// `slot`): CRC16/XMODEM of the key's hash tag, or of the whole key without one, mod 16384.

/** The bytes between the first `{` and the next `}`, when there are any; else the key. */
function hashTag(key) {
  const open = key.indexOf(0x7b) // {
  if (open < 0) return key
  const close = key.indexOf(0x7d, open + 1) // }
  return close > open + 1 ? key.subarray(open + 1, close) : key
}

function crc16(bytes) {
  let crc = 0
  for (const byte of bytes) {
    crc ^= byte << 8
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc
}

/** The slot (0..16383) of `key`, a Buffer or a string (read as UTF-8). */
function keySlot(key) {
  return crc16(hashTag(Buffer.isBuffer(key) ? key : Buffer.from(String(key), 'utf8'))) % 16384
}

module.exports = { keySlot }
