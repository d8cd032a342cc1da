'use strict'

// Reads the address the operator gave (--url or REDIS_URL) into what node:net/node:tls take.
// No default: an address nobody named is never contacted.

class CliError extends Error {
  constructor(code, message) {
    super(message)
    this.exitCode = code
  }
}

/** Exit codes, one per kind of failure (printed by --help, listed in the README). */
const EXIT = Object.freeze({
  ok: 0,
  failed: 1,
  usage: 2,
  badUrl: 3,
  unreachable: 4,
  notFound: 5,
  refused: 6,
})

function badUrl(message) {
  return new CliError(EXIT.badUrl, message)
}

function decode(part, what) {
  try {
    return decodeURIComponent(part)
  } catch {
    throw badUrl(`the URL's ${what} is not valid percent-encoding`)
  }
}

function database(text) {
  if (text === undefined || text === '') return 0
  if (!/^\d+$/.test(text)) throw badUrl(`the URL's database must be a number, got "${text}"`)
  return Number(text)
}

/**
 * `{ host, port }` or `{ path }`, with `tls`, `username`, `password`, `db` and `shown` (the
 * URL with its password masked, safe to print).
 */
function parseAddress(text) {
  if (typeof text !== 'string' || text.trim() === '') {
    throw badUrl('no Redis address: pass --url redis://host:port or set REDIS_URL')
  }
  let url
  try {
    url = new URL(text.trim())
  } catch {
    throw badUrl('--url is not a URL (expected redis://host:port, rediss://host:port or unix:///path)')
  }
  const scheme = url.protocol.slice(0, -1)
  if (scheme === 'memory') {
    throw badUrl('memory:// lives inside the process that made it: the command line cannot see it')
  }
  if (scheme === 'redis+cluster' || scheme === 'redis+sentinel') {
    throw badUrl(`${scheme}:// is not supported yet (nor by the library)`)
  }
  if (url.password && !url.username && url.password === '') throw badUrl('empty password')
  const auth = {
    username: url.username ? decode(url.username, 'user name') : undefined,
    password: url.password ? decode(url.password, 'password') : undefined,
  }
  const masked = new URL(url.href)
  if (masked.password) masked.password = '***'
  if (scheme === 'unix') {
    if (!url.pathname || url.pathname === '/') throw badUrl('unix:// needs a socket path')
    return { ...auth, path: decode(url.pathname, 'path'), db: database(url.searchParams.get('db') ?? undefined), tls: false, shown: masked.href }
  }
  if (scheme !== 'redis' && scheme !== 'rediss') {
    throw badUrl(`unsupported URL scheme "${scheme}:" (expected redis://, rediss:// or unix://)`)
  }
  if (!url.hostname) throw badUrl('the URL names no host')
  const port = url.port === '' ? 6379 : Number(url.port)
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  return {
    ...auth,
    host,
    port,
    db: database(url.pathname.replace(/^\//, '')),
    tls: scheme === 'rediss',
    shown: masked.href,
  }
}

module.exports = { parseAddress, CliError, EXIT }
