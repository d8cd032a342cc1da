'use strict'

// Reads a `redis+sentinel://` URL by the library's rules (src/core/backend/endpoint_multi.rs):
// sentinels on 26379 unless a port is given, each named once, the master's name required,
// then an optional database, and only sentinelUsername/sentinelPassword in the query. The
// user and password before the hosts are the master's; the sentinels' own are in the query.

const { badUrl, decodeUrlPart: decode } = require('./errors')

const SENTINEL_PORT = 26379

// A refusal never quotes the text it refuses: a user name or password with an unencoded '/',
// '?' or '&' splits into the host list, the path or the query (`app:pa?ss@s1/m` reads as host
// `app:pa`), so any of them may hold a piece of a secret. Sentinels are named by position.
const ENCODE_HINT = "percent-encode '@', ':', '/', '?', '#' and '&' in a user name or password"

/** One `host[:port]` of the list (the `index`th, from 0), IPv6 in brackets. */
function sentinelNode(text, index) {
  if (text === '') throw badUrl("the URL's host list has an empty entry; separate hosts with single commas")
  let url
  try {
    url = new URL(`redis://${text}`)
  } catch {
    throw badUrl(`the URL's sentinel ${index + 1} (of the host list) is not host:port; ${ENCODE_HINT}`)
  }
  if (!url.hostname || url.pathname !== '' || url.username || url.password || url.search) {
    throw badUrl(`the URL's sentinel ${index + 1} (of the host list) is not host:port; ${ENCODE_HINT}`)
  }
  const port = url.port === '' ? SENTINEL_PORT : Number(url.port)
  if (port === 0) throw badUrl(`the URL's sentinel ${index + 1} (of the host list) has port 0`)
  return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port }
}

/** `{ sentinels, name, db, tls, username, password, sentinelUsername, sentinelPassword, shown }`. */
function parseSentinelAddress(text) {
  const [scheme, afterScheme] = text.split('://', 2)
  const tls = scheme === 'rediss+sentinel'
  const queryAt = afterScheme.indexOf('?')
  const rest = queryAt < 0 ? afterScheme : afterScheme.slice(0, queryAt)
  const query = queryAt < 0 ? '' : afterScheme.slice(queryAt + 1)
  const slash = rest.indexOf('/')
  const authority = slash < 0 ? rest : rest.slice(0, slash)
  const path = slash < 0 ? '' : rest.slice(slash + 1)
  const at = authority.lastIndexOf('@')
  const userinfo = at < 0 ? null : authority.slice(0, at)
  const sentinels = authority.slice(at + 1).split(',').map(sentinelNode)
  sentinels.forEach((s, i) => {
    if (sentinels.slice(0, i).some((o) => o.host === s.host && o.port === s.port)) {
      throw badUrl(`the URL names sentinel ${s.host}:${s.port} twice; name each once`)
    }
  })
  const [name, db, extra] = path.split('/')
  if (!name) throw badUrl(`a ${scheme}:// URL must name its master after the hosts: ${scheme}://host:port/<name>`)
  if (extra !== undefined) throw badUrl(`a ${scheme}:// URL is host:port,host:port/<name>[/<db>], with nothing after the database`)
  if (db !== undefined && db !== '' && !/^\d+$/.test(db)) throw badUrl(`the URL's database must be a number (it follows the master's name); ${ENCODE_HINT}`)
  const out = {
    sentinels,
    name: decode(name, 'master name'),
    db: db ? Number(db) : 0,
    tls,
    username: undefined,
    password: undefined,
    sentinelUsername: undefined,
    sentinelPassword: undefined,
  }
  if (userinfo !== null) {
    const colon = userinfo.indexOf(':')
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon)
    out.username = user ? decode(user, 'user name') : undefined
    const password = colon < 0 ? '' : decode(userinfo.slice(colon + 1), 'password')
    out.password = password || undefined
  }
  for (const pair of query.split('&').filter(Boolean)) {
    const eq = pair.indexOf('=')
    const key = eq < 0 ? pair : pair.slice(0, eq)
    const value = decode(eq < 0 ? '' : pair.slice(eq + 1), key)
    if (key === 'sentinelUsername') out.sentinelUsername = value || undefined
    else if (key === 'sentinelPassword') out.sentinelPassword = value || undefined
    else throw badUrl(`a ${scheme}:// URL takes sentinelUsername and sentinelPassword only in its query; ${ENCODE_HINT}`)
  }
  const who = userinfo === null ? '' : `${out.username ? encodeURIComponent(out.username) : ''}${out.password !== undefined ? ':***' : ''}@`
  const hosts = sentinels.map((s) => `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`).join(',')
  out.shown = `${scheme}://${who}${hosts}/${encodeURIComponent(out.name)}${out.db ? `/${out.db}` : ''}`
  return out
}

module.exports = { parseSentinelAddress }
