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

/** Why `watch` refuses several independent servers (never quoting them). */
const SEVERAL_SERVERS =
  "--url names several servers (a Redlock's nodes?): watch reads one server, one Sentinel set or one Cluster at a time; run it once per node"

const SCHEME = '(?:rediss?(?:\\+sentinel|\\+cluster)?|unix):\\/\\/'

/**
 * An address that lists several URLs (a JSON array, or URLs joined by commas or spaces), as a
 * Redlock's nodes are given to the library, rather than one odd URL.
 */
function severalUrls(text) {
  if (/^\s*\[/.test(text)) return true
  const schemes = text.match(new RegExp(`(?:^|[\\s,;])${SCHEME}`, 'g')) ?? []
  return schemes.length > 1
}

/**
 * The URLs `texts` name (each --url given, or REDIS_URL): one each, or a Redlock's nodes
 * listed in one (a JSON array of strings, or URLs joined by commas, semicolons or spaces).
 * A Sentinel set's or a Cluster's hosts, joined by commas after one scheme, stay one URL.
 */
function splitUrls(texts) {
  const urls = []
  for (const text of texts) {
    if (typeof text !== 'string' || !severalUrls(text)) {
      urls.push(text)
      continue
    }
    if (/^\s*\[/.test(text)) {
      let list
      try {
        list = JSON.parse(text)
      } catch {
        throw badUrl('--url starts with [ but is not a JSON array of URLs')
      }
      if (!Array.isArray(list) || list.length === 0 || !list.every((url) => typeof url === 'string')) {
        throw badUrl('--url starts with [ but is not a JSON array of URLs')
      }
      urls.push(...list)
      continue
    }
    urls.push(...text.trim().split(new RegExp(`[\\s,;]+(?=${SCHEME})`)))
  }
  return urls
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
  if (severalUrls(text)) throw badUrl('--url names several servers: give each its own --url')
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

module.exports = { parseAddress, splitUrls, CliError, EXIT, SEVERAL_SERVERS }
