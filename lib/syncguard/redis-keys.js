'use strict'

// syncguard's Redis layout, in one place for the backend and the command line (lib/cli):
// the lock key, the index key naming it by lockId, and the fence counter that never expires.
const { makeStorageKey } = require('./keys')

// syncguard's Redis key budget: 1000 bytes, 26 kept for ":id:" and a lockId.
const LIMIT = 1000
const RESERVE = 26

const lockKeyOf = (prefix, key) => makeStorageKey(prefix, key, LIMIT, RESERVE)
const indexKeyOf = (prefix, lockId) => makeStorageKey(prefix, `id:${lockId}`, LIMIT, RESERVE)
const fenceKeyOf = (prefix, lockKey) => makeStorageKey(prefix, `fence:${lockKey}`, LIMIT, RESERVE)

module.exports = { LIMIT, RESERVE, lockKeyOf, indexKeyOf, fenceKeyOf }
