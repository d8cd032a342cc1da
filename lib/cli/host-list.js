'use strict'

// The parts of a many-host URL (redis+sentinel://, redis+cluster://) read by the library's
// rules (src/core/backend/endpoint_multi.rs): `[user[:pass]@]h1[:p1],h2[:p2]` before the
// path, each host named once.

const { badUrl, decodeUrlPart: decode } = require('./errors')

// A refusal never quotes the text it refuses: a user name or password with an unencoded '/',
// '?' or '&' splits into the host list, the path or the query (`app:pa?ss@s1/m` reads as host
// `app:pa`), so any of them may hold a piece of a secret. Hosts are named by position.
const ENCODE_HINT = "percent-encode '@', ':', '/', '?', '#' and '&' in a user name or password"

/** The `index`th `host[:port]` of the list (from 0), IPv6 in brackets; `what` is 'sentinel' or 'node'. */
function hostNode(text, index, what, defaultPort) {
  if (text === '') throw badUrl("the URL's host list has an empty entry; separate hosts with single commas")
  const refuse = () => badUrl(`the URL's ${what} ${index + 1} (of the host list) is not host:port; ${ENCODE_HINT}`)
  let url
  try {
    url = new URL(`redis://${text}`)
  } catch {
    throw refuse()
  }
  if (!url.hostname || url.pathname !== '' || url.username || url.password || url.search) throw refuse()
  const port = url.port === '' ? defaultPort : Number(url.port)
  if (port === 0) throw badUrl(`the URL's ${what} ${index + 1} (of the host list) has port 0`)
  return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port }
}

const hostPort = ({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`

/**
 * `authority` (what precedes the path) read apart: `{ hosts, username, password, who }`,
 * `who` being the credentials as the URL may be printed (`user:***@`, or '').
 */
function readAuthority(authority, what, defaultPort) {
  const at = authority.lastIndexOf('@')
  const userinfo = at < 0 ? null : authority.slice(0, at)
  const hosts = authority.slice(at + 1).split(',').map((text, i) => hostNode(text, i, what, defaultPort))
  hosts.forEach((h, i) => {
    if (hosts.slice(0, i).some((o) => o.host === h.host && o.port === h.port)) {
      throw badUrl(`the URL names ${what} ${hostPort(h)} twice; name each once`)
    }
  })
  let username
  let password
  if (userinfo !== null) {
    const colon = userinfo.indexOf(':')
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon)
    username = user ? decode(user, 'user name') : undefined
    password = (colon < 0 ? '' : decode(userinfo.slice(colon + 1), 'password')) || undefined
  }
  const who = userinfo === null ? '' : `${username ? encodeURIComponent(username) : ''}${password !== undefined ? ':***' : ''}@`
  return { hosts, username, password, who }
}

/** `redis+cluster://[user:pass@]h1:p1,h2:p2`: the seeds (port 6379 by default), no path or query. */
function parseClusterAddress(text) {
  const [scheme, rest] = text.split('://', 2)
  const end = rest.search(/[/?#]/)
  if (end >= 0 && rest.slice(end) !== '/') {
    throw badUrl(`a ${scheme}:// URL takes no path or query: a cluster has database 0 only; ${ENCODE_HINT}`)
  }
  const { hosts, username, password, who } = readAuthority(end < 0 ? rest : rest.slice(0, end), 'node', 6379)
  return {
    seeds: hosts,
    db: 0,
    tls: scheme === 'rediss+cluster',
    username,
    password,
    shown: `${scheme}://${who}${hosts.map(hostPort).join(',')}`,
  }
}

module.exports = { ENCODE_HINT, readAuthority, hostPort, parseClusterAddress }
