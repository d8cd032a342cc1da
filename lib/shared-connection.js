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

/** `value` (a Redlock's nodes included) as one string, PEM bytes as base64 (JSON would spell out every byte). */
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

// NativeConnections of URLs given alone, by the caller's own string: V8 keeps a string's hash
// in it, so a program that passes the same URL to each lock it makes hashes it once, where
// the JSON of the fields is a new string to hash and compare in full every time.
const byUrl = new Map()

/** The NativeConnection of `url` given alone: the one `sharedConnection({ url })` gives. */
function sharedUrl(url) {
  return sharedIn(byUrl, url, () => sharedConnection({ url }))
}

/** The NativeConnection for `fields` (what lib/connection.js read); throws as its constructor. */
function sharedConnection(fields) {
  // Without PEM bytes, plain JSON says the same as identity(), without a call per field.
  const plain = fields.tlsCa === undefined && fields.tlsCert === undefined && fields.tlsKey === undefined && fields.nodes === undefined
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

// Per NativeConnection and kind of object, the first one made for each name (while it
// lives), to be found again by comparing its settings field by field rather than by the
// JSON of them.
const recent = new WeakMap()

/**
 * `settings` (an object of strings, numbers, booleans and undefined) as one string that
 * tells every value apart: JSON would write Infinity as it writes undefined (a default).
 */
function settingsKey(settings) {
  let key = ''
  for (const name in settings) {
    const value = settings[name]
    key += typeof value === 'string' ? `${JSON.stringify(value)} ` : `${value} `
  }
  return key
}

/** Whether `a` and `b` (settings objects with the same fields, in one order) hold the same values. */
function sameValues(a, b) {
  for (const name in a) if (!Object.is(a[name], b[name])) return false
  return true
}

/**
 * As `sharedOn(connection, settingsKey(settings), make)` for objects of `kind`, found first by `name` (a string the caller has,
 * such as a lock's name) among the `kind` objects on `connection`, when the one first made
 * for that name has the same `settings` (which `make` must keep as `.settings`, beside the
 * `connection`, which the objects sharing it keep alive so that it stays the one shared): most
 * programs make each of their locks with one set of settings, so a lock made again for a job
 * costs a few comparisons instead of writing out its settings.
 */
function sharedAlike(connection, kind, name, settings, make) {
  let kinds = recent.get(connection)
  if (kinds === undefined) {
    kinds = new Map()
    recent.set(connection, kinds)
  }
  let names = kinds.get(kind)
  if (names === undefined) {
    names = new Map()
    kinds.set(kind, names)
  }
  const last = names.get(name)?.deref()
  if (last !== undefined && sameValues(last.settings, settings)) return last
  const value = sharedOn(connection, `${kind} ${settingsKey(settings)}`, make)
  // A name's first settings stay the ones found fast while their object lives: replaced
  // only when it is gone, each object is registered once per name.
  if (last === undefined) {
    names.set(name, new WeakRef(value))
    forget.register(value, [names, name])
  }
  return value
}

/**
 * The NativeConnection of `url` (a URL given alone, else undefined) or `fields`, with the
 * options that make a connection of its own (README "Grants across processes", "Guarantees"):
 * left out when not asked for (false, 0), so that connection is today's, shared alike.
 */
function sharedWith(url, fields, { crossProcessGrants, restartQuarantineMs }) {
  if (url !== undefined && !crossProcessGrants && !restartQuarantineMs) return sharedUrl(url)
  let own = url !== undefined ? { url } : fields
  if (crossProcessGrants) own = { ...own, crossProcessGrants: true }
  if (restartQuarantineMs) own = { ...own, restartQuarantineMs }
  return sharedConnection(own)
}

module.exports = { sharedConnection, sharedUrl, sharedAlike, sharedWith }
