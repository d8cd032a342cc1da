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
const forget = new FinalizationRegistry((key) => {
  if (made.get(key)?.deref() === undefined) made.delete(key)
})

/** `value` as one string, PEM bytes as base64 (JSON would spell out every byte). */
function identity(value) {
  return JSON.stringify(value, function bytes(name, field) {
    const raw = this[name]
    return ArrayBuffer.isView(raw) ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64') : field
  })
}

/** What `make()` made for `key` and is still alive, or what it makes now (throws as it). */
function shared(key, make) {
  let value = made.get(key)?.deref()
  if (value === undefined) {
    value = make()
    made.set(key, new WeakRef(value))
    forget.register(value, key)
  }
  return value
}

/** The NativeConnection for `fields` (what lib/connection.js read); throws as its constructor. */
function sharedConnection(fields) {
  return shared(`connection ${identity(fields)}`, () => new NativeConnection(fields, completions))
}

module.exports = { identity, shared, sharedConnection }
