'use strict'

// Reads a `redis+sentinel://` URL by the library's rules (src/core/backend/endpoint_multi.rs):
// sentinels on 26379 unless a port is given, each named once, the master's name required,
// then an optional database, and only sentinelUsername/sentinelPassword in the query. The
// user and password before the hosts are the master's; the sentinels' own are in the query.

const { badUrl, decodeUrlPart: decode } = require('./errors')
const { ENCODE_HINT, readAuthority, hostPort } = require('./host-list')

const SENTINEL_PORT = 26379

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
  const { hosts: sentinels, username, password, who } = readAuthority(authority, 'sentinel', SENTINEL_PORT)
  const [name, db, extra] = path.split('/')
  if (!name) throw badUrl(`a ${scheme}:// URL must name its master after the hosts: ${scheme}://host:port/<name>`)
  if (extra !== undefined) throw badUrl(`a ${scheme}:// URL is host:port,host:port/<name>[/<db>], with nothing after the database`)
  if (db !== undefined && db !== '' && !/^\d+$/.test(db)) throw badUrl(`the URL's database must be a number (it follows the master's name); ${ENCODE_HINT}`)
  const out = {
    sentinels,
    name: decode(name, 'master name'),
    db: db ? Number(db) : 0,
    tls,
    username,
    password,
    sentinelUsername: undefined,
    sentinelPassword: undefined,
  }
  for (const pair of query.split('&').filter(Boolean)) {
    const eq = pair.indexOf('=')
    const key = eq < 0 ? pair : pair.slice(0, eq)
    const value = decode(eq < 0 ? '' : pair.slice(eq + 1), key)
    if (key === 'sentinelUsername') out.sentinelUsername = value || undefined
    else if (key === 'sentinelPassword') out.sentinelPassword = value || undefined
    else throw badUrl(`a ${scheme}:// URL takes sentinelUsername and sentinelPassword only in its query; ${ENCODE_HINT}`)
  }
  const hosts = sentinels.map(hostPort).join(',')
  out.shown = `${scheme}://${who}${hosts}/${encodeURIComponent(out.name)}${out.db ? `/${out.db}` : ''}`
  return out
}

module.exports = { parseSentinelAddress }
