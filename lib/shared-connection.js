'use strict'

// Native objects that depend only on their settings, made once per set of settings on this
// JS thread and handed to every object made with the same settings while any of them is
// alive: one NativeConnection per connection (making a lock then converts no connection
// options, parses no URL and looks nothing up natively), and one NativeDistributedLock per
// connection and options (it keeps no state of its own between calls). Settings are told apart
// by their full value (TLS PEM bytes and credentials included), never by the object that
// carried them, so a client or options object changed later is read anew.
const { NativeConnection } = require('./native')
const { completions } = require('./completions')

const made = new Map()
const forget = new FinalizationRegistry(([table, key]) => {
  if (table.get(key)?.deref() === undefined) table.delete(key)
})
// What is shared on each NativeConnection (`sharedOn`), by a key that need not repeat the
// connection's: lookups by short strings, made per lock.
const madeOn = new WeakMap()

/** `value` as one string, PEM bytes as base64 (JSON would spell out every byte). */
function identity(value) {
  return JSON.stringify(value, function bytes(name, field) {
    const raw = this[name]
    return ArrayBuffer.isView(raw) ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64') : field
  })
}

/** What `make()` made for `key` in `table` and is still alive, or what it makes now. */
function sharedIn(table, key, make) {
  let value = table.get(key)?.deref()
  if (value === undefined) {
    value = make()
    table.set(key, new WeakRef(value))
    forget.register(value, [table, key])
  }
  return value
}

/** What `make()` made for `key` and is still alive, or what it makes now (throws as it). */
function shared(key, make) {
  return sharedIn(made, key, make)
}

/** The NativeConnection for `fields` (what lib/connection.js read); throws as its constructor. */
function sharedConnection(fields) {
  // Without PEM bytes, plain JSON says the same as identity(), without a call per field.
  const plain = fields.tlsCa === undefined && fields.tlsCert === undefined && fields.tlsKey === undefined
  return shared(`connection ${plain ? JSON.stringify(fields) : identity(fields)}`, () => new NativeConnection(fields, completions))
}

/**
 * What `make()` made for `what` on `connection` (a NativeConnection from `sharedConnection`)
 * and is still alive, or what it makes now.
 */
function sharedOn(connection, what, make) {
  let table = madeOn.get(connection)
  if (table === undefined) {
    table = new Map()
    madeOn.set(connection, table)
  }
  return sharedIn(table, what, make)
}

module.exports = { identity, shared, sharedConnection, sharedOn }
