'use strict'

// A small RESP2 client for the command line: the tool needs SCAN, TYPE and pub/sub, which the
// lock engine deliberately does not offer. Every command is bounded by a timeout; replies
// come back in order; bulk strings stay Buffers (keys are bytes, siblings hold 0xFF).

const net = require('node:net')
const tls = require('node:tls')
const { CliError, EXIT } = require('./errors')
const { certificateProblem } = require('./tls-files')

class ReplyError extends Error {}

// A reply that is no RESP: the address is some other server (an HTTP port, say).
class NotResp extends Error {}

// Redis's own bound on a bulk string (proto-max-bulk-len's default).
const MAX_BULK = 512 * 1024 * 1024

/**
 * A length or integer field: a bad server's text is refused here, as NaN would read the
 * stream from the wrong place (or at 0 again, for ever).
 */
function whole(line, max = Number.MAX_SAFE_INTEGER) {
  if (!/^(?:-1|-?\d{1,16})$/.test(line) || Number(line) > max) throw new NotResp()
  return Number(line)
}

/** Parses as many whole replies as `buffer` holds from `start`; answers [value, next] or null. */
function parse(buffer, start) {
  const end = buffer.indexOf('\r\n', start)
  if (end < 0) return null
  const kind = buffer[start]
  const line = buffer.toString('utf8', start + 1, end)
  const next = end + 2
  switch (kind) {
    case 0x2b: // +
      return [line, next]
    case 0x2d: // -
      return [new ReplyError(line), next]
    case 0x3a: // :
      return [whole(line), next]
    case 0x24: { // $
      const len = whole(line, MAX_BULK)
      if (len < -1) throw new NotResp()
      if (len < 0) return [null, next]
      if (buffer.length < next + len + 2) return null
      if (buffer[next + len] !== 0x0d || buffer[next + len + 1] !== 0x0a) throw new NotResp()
      return [buffer.subarray(next, next + len), next + len + 2]
    }
    case 0x2a: { // *
      const count = whole(line, MAX_BULK)
      if (count < -1) throw new NotResp()
      if (count < 0) return [null, next]
      const items = []
      let at = next
      for (let i = 0; i < count; i++) {
        const item = parse(buffer, at)
        if (!item) return null
        items.push(item[0])
        at = item[1]
      }
      return [items, at]
    }
    default:
      throw new NotResp()
  }
}

/**
 * Where the socket goes. SNI names a host, never an address (RFC 6066): a cluster node read
 * from CLUSTER SLOTS is an IP, which Node warns about as a servername (DEP0123). Without one,
 * the certificate is still checked against the host, IP addresses included.
 */
function socketOptions(a) {
  if (a.path) return { path: a.path }
  const options = { host: a.host, port: a.port }
  if (!net.isIP(a.host)) options.servername = a.host
  return options
}

function encode(args) {
  const parts = [Buffer.from(`*${args.length}\r\n`)]
  for (const arg of args) {
    const bytes = Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg))
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'))
  }
  return Buffer.concat(parts)
}

class RespClient {
  constructor(address, { timeoutMs = 5000 } = {}) {
    this.address = address
    this.timeoutMs = timeoutMs
    this.pending = []
    this.buffer = Buffer.alloc(0)
    this.onPush = null
    // Set by a SUBSCRIBE of any kind: only then can an array be a push and not a reply (a
    // ZRANGE may well answer with a member named "message").
    this.subscribed = false
    this.closed = false
  }

  /** Opens the connection, authenticates and selects the database. */
  async connect() {
    const a = this.address
    await new Promise((resolve, reject) => {
      const unreachable = (why) =>
        new CliError(EXIT.unreachable, `cannot reach Redis at ${a.shown}: ${why}`)
      const options = socketOptions(a)
      // --cacert, --cert and --key (lib/cli/tls-files.js), read once, given to every node.
      const socket = a.tls ? tls.connect({ ...options, ...a.tlsFiles }) : net.connect(options)
      const timer = setTimeout(() => {
        socket.destroy()
        reject(unreachable(`no connection within ${this.timeoutMs} ms`))
      }, this.timeoutMs)
      socket.once(a.tls ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer)
        resolve()
      })
      socket.once('error', (err) => {
        clearTimeout(timer)
        reject(unreachable(certificateProblem(err, a) || err.code || err.message))
      })
      this.socket = socket
    })
    this.socket.on('data', (chunk) => this.read(chunk))
    // A server that wants a client certificate says so after the handshake (TLS 1.3): here.
    this.socket.on('error', (err) => {
      const problem = certificateProblem(err, a)
      this.fail(new CliError(EXIT.unreachable, problem ? `cannot reach Redis at ${a.shown}: ${problem}` : `Redis connection failed: ${err.code || err.message}`))
    })
    this.socket.on('close', () => this.fail(new CliError(EXIT.unreachable, 'Redis closed the connection')))
    try {
      if (this.address.password !== undefined) {
        const who = this.address.username ? [this.address.username] : []
        await this.call('AUTH', ...who, this.address.password)
      }
      if (this.address.db) await this.call('SELECT', this.address.db)
      await this.call('PING')
    } catch (err) {
      this.close()
      if (err instanceof CliError) throw err
      // Never the password: the server's own reason (WRONGPASS, NOAUTH) only.
      throw new CliError(EXIT.unreachable, `Redis at ${a.shown} refused the connection: ${err.message}`)
    }
    return this
  }

  read(chunk) {
    if (this.closed) return
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk
    let at = 0
    for (;;) {
      let parsed
      try {
        parsed = parse(this.buffer, at)
      } catch (err) {
        if (!(err instanceof NotResp)) throw err
        // Thrown from a socket's 'data' handler it would crash the tool with a stack: the
        // waiting command fails instead, and what the server sent is not echoed.
        this.fail(new CliError(EXIT.unreachable, `${this.address.shown} answered with something other than RESP: not a Redis server`))
        this.socket.destroy()
        return
      }
      if (!parsed) break
      at = parsed[1]
      this.deliver(parsed[0])
    }
    this.buffer = this.buffer.subarray(at)
  }

  deliver(value) {
    // The tool never sends SUNSUBSCRIBE: one arrives when a cluster moves a watched slot.
    const isPush = this.subscribed && Array.isArray(value) && Buffer.isBuffer(value[0]) &&
      ['message', 'pmessage', 'smessage', 'sunsubscribe'].includes(value[0].toString())
    if (isPush) {
      if (this.onPush) this.onPush(value)
      return
    }
    const waiter = this.pending.shift()
    if (!waiter) return
    clearTimeout(waiter.timer)
    if (value instanceof ReplyError) waiter.reject(value)
    else waiter.resolve(value)
  }

  fail(err) {
    if (this.closed) return
    this.closed = true
    for (const waiter of this.pending.splice(0)) {
      clearTimeout(waiter.timer)
      waiter.reject(err)
    }
    if (this.onClose) this.onClose(err)
  }

  /** Sends one command; resolves with its reply, rejects with the server's error or a timeout. */
  call(...args) {
    if (this.closed) return Promise.reject(new CliError(EXIT.unreachable, `Redis connection to ${this.address.shown} is closed`))
    if (/^[PS]?SUBSCRIBE$/i.test(String(args[0]))) this.subscribed = true
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        // Named: on a cluster, which of its nodes is silent matters.
        this.fail(new CliError(EXIT.unreachable, `Redis at ${this.address.shown} did not answer ${args[0]} within ${this.timeoutMs} ms`))
        this.socket.destroy()
      }, this.timeoutMs)
      this.pending.push({ resolve, reject, timer })
      this.socket.write(encode(args))
    })
  }

  close() {
    this.closed = true
    for (const waiter of this.pending.splice(0)) clearTimeout(waiter.timer)
    if (this.socket) this.socket.destroy()
  }
}

async function connect(address, options) {
  return new RespClient(address, options).connect()
}

/** A reply read as text (bulk strings come as Buffers). */
const text = (value) => (Buffer.isBuffer(value) ? value.toString('utf8') : String(value))

module.exports = { connect, ReplyError, text, socketOptions }
