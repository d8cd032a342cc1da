'use strict'

// Reads the address the operator gave (--url or REDIS_URL) into what node:net/node:tls take.
// No default: an address nobody named is never contacted.

const { CliError, EXIT, badUrl, decodeUrlPart: decode } = require('./errors')
const { parseSentinelAddress } = require('./sentinel-address')
const { parseClusterAddress } = require('./host-list')

// Never quotes the text: an unencoded '/' in a password puts a piece of it in the path.
function database(text, where, hint = '') {
  if (text === undefined || text === '') return 0
  if (!/^\d+$/.test(text)) throw badUrl(`the URL's database (${where}) must be a number${hint}`)
  return Number(text)
}

/** Why an address naming several independent servers is refused (never quoting it). */
const SEVERAL_SERVERS =
  "--url names several servers (a Redlock's nodes?): the command line reads one server, one Sentinel set or one Cluster at a time; run it once per node"

/**
 * An address that lists several URLs (a JSON array, or URLs joined by commas or spaces), as a
 * Redlock's nodes are given to the library: refused by name rather than read as one odd URL.
 */
function severalUrls(text) {
  if (/^\s*\[/.test(text)) return true
  const schemes = text.match(/(?:^|[\s,;])(?:rediss?(?:\+sentinel|\+cluster)?|unix):\/\//g) ?? []
  return schemes.length > 1
}

/**
 * `{ host, port }`, `{ path }`, `{ sentinels, name }` (lib/cli/sentinel-address.js) or
 * `{ seeds }` (a cluster's, lib/cli/host-list.js), with `tls`, `username`, `password`, `db` and `shown` (the
 * URL with its password masked, safe to print).
 */
function parseAddress(text) {
  if (typeof text !== 'string' || text.trim() === '') {
    throw badUrl('no Redis address: pass --url redis://host:port or set REDIS_URL')
  }
  if (severalUrls(text)) throw badUrl(SEVERAL_SERVERS)
  // Many hosts are not one URL authority: read apart, by the library's rules.
  if (/^rediss?\+sentinel:\/\//.test(text.trim())) return parseSentinelAddress(text.trim())
  if (/^rediss?\+cluster:\/\//.test(text.trim())) return parseClusterAddress(text.trim())
  let url
  try {
    url = new URL(text.trim())
  } catch {
    throw badUrl('--url is not a URL (expected redis://host:port, rediss://host:port, redis+sentinel://host:port,host:port/<name>, redis+cluster://host:port,host:port or unix:///path)')
  }
  const scheme = url.protocol.slice(0, -1)
  if (scheme === 'memory') {
    throw badUrl('memory:// lives inside the process that made it: the command line cannot see it')
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
    return { ...auth, path: decode(url.pathname, 'path'), db: database(url.searchParams.get('db') ?? undefined, 'its db parameter'), tls: false, shown: masked.href }
  }
  if (scheme !== 'redis' && scheme !== 'rediss') {
    throw badUrl(`unsupported URL scheme "${scheme}:" (expected redis://, rediss://, redis+sentinel://, redis+cluster:// or unix://)`)
  }
  if (!url.hostname) throw badUrl('the URL names no host')
  const port = url.port === '' ? 6379 : Number(url.port)
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  return {
    ...auth,
    host,
    port,
    db: database(url.pathname.replace(/^\//, ''), 'its path', "; percent-encode '/' in a user name or password"),
    tls: scheme === 'rediss',
    shown: masked.href,
  }
}

module.exports = { parseAddress, CliError, EXIT, SEVERAL_SERVERS }
