'use strict'

// Reads connection settings from whatever the user hands us, without touching the user's
// client: we open our own connection (from Rust) and never close or reconfigure theirs.
const { invalidArgument } = require('./errors')
const check = require('./validate')

/** What `name` may be, for error messages. */
const expected = (name) =>
  `${name} must be an ioredis client, a node-redis client, a redis://, rediss://, redis+cluster://, redis+sentinel://, unix:// or memory:// URL, or options naming host, port, path, url, cluster or sentinels`

// TLS options as ioredis (`tls: {...}`) and node-redis (`socket: { tls: true, ... }`) take
// them, that is, Node's tls.connect options. We honour these; the PEM travels as bytes.
// Options that we cannot honour and whose loss would weaken or change the connection are
// refused by name rather than ignored.
const UNSUPPORTED_TLS = {
  pfx: 'pass the PEM certificate and key as cert and key',
  passphrase: 'pass an unencrypted PEM key',
  secureContext: 'pass ca, cert and key instead',
  crl: 'certificate revocation lists are not supported',
  checkServerIdentity: 'the certificate is always checked against the host',
  ciphers: 'cipher suites are fixed (TLS 1.2 and 1.3 with forward secrecy only)',
  secureProtocol: 'TLS 1.2 and 1.3 are used',
  pskCallback: 'pre-shared keys are not supported',
}
// We speak TLS 1.2 or 1.3, so these bounds hold anyway.
const MIN_VERSIONS = ['TLSv1', 'TLSv1.1', 'TLSv1.2']
const MAX_VERSIONS = ['TLSv1.3']

/** PEM as Node takes it (a string, a Buffer or typed array, or an array of them) as one Buffer. */
function pem(value, name, { many = true } = {}) {
  if (value === undefined || value === null) return undefined
  const parts = Array.isArray(value) ? value : [value]
  if (parts.length === 0 || (!many && parts.length > 1)) {
    const what = many ? 'at least one PEM entry' : 'exactly one PEM entry'
    throw invalidArgument(TypeError, name, `${name} must hold ${what}, got an array of ${parts.length}`)
  }
  const buffers = parts.map((part) => {
    // Node also takes a key as { pem, passphrase }.
    if (part !== null && typeof part === 'object' && !ArrayBuffer.isView(part) && 'pem' in part) {
      if (part.passphrase !== undefined) {
        throw invalidArgument(TypeError, `${name}.passphrase`, `${name}.passphrase is not supported: ${UNSUPPORTED_TLS.passphrase}`)
      }
      part = part.pem
    }
    if (typeof part === 'string') return Buffer.from(part, 'utf8')
    if (ArrayBuffer.isView(part)) return Buffer.from(part.buffer, part.byteOffset, part.byteLength)
    // Never print the value: it may be a key.
    throw invalidArgument(TypeError, name, `${name} must be a PEM string or Buffer, got ${check.describe(part)}`)
  })
  return buffers.length === 1 ? Buffer.from(buffers[0]) : Buffer.concat(buffers.flatMap((b) => [b, Buffer.from('\n')]))
}

/**
 * Connection fields for a TLS setting: `true`, or an options object (`{ ca, cert, key,
 * servername, rejectUnauthorized }`). `false`/`undefined` give no fields (plain text unless a
 * rediss:// URL says otherwise).
 */
function tlsFields(tls, name) {
  if (tls === undefined || tls === null || tls === false) return {}
  if (tls === true) return { tls: true }
  if (typeof tls !== 'object' || Array.isArray(tls)) {
    throw invalidArgument(TypeError, name, `${name} must be a boolean or a TLS options object, got ${check.describe(tls)}`)
  }
  for (const [option, why] of Object.entries(UNSUPPORTED_TLS)) {
    if (tls[option] !== undefined) {
      throw invalidArgument(TypeError, `${name}.${option}`, `${name}.${option} is not supported: ${why}`)
    }
  }
  if (tls.minVersion !== undefined && !MIN_VERSIONS.includes(tls.minVersion)) {
    throw invalidArgument(TypeError, `${name}.minVersion`, `${name}.minVersion must be one of ${MIN_VERSIONS.join(', ')} (TLS 1.2 and 1.3 are used)`)
  }
  if (tls.maxVersion !== undefined && !MAX_VERSIONS.includes(tls.maxVersion)) {
    throw invalidArgument(TypeError, `${name}.maxVersion`, `${name}.maxVersion must be TLSv1.3 (TLS 1.2 and 1.3 are used)`)
  }
  check.optionalString(tls.servername, `${name}.servername`)
  check.optionalBoolean(tls.rejectUnauthorized, `${name}.rejectUnauthorized`)
  return {
    tls: true,
    tlsCa: pem(tls.ca, `${name}.ca`),
    tlsCert: pem(tls.cert, `${name}.cert`),
    tlsKey: pem(tls.key, `${name}.key`, { many: false }),
    tlsServername: tls.servername,
    tlsRejectUnauthorized: tls.rejectUnauthorized,
  }
}

// A real client can connect itself; an object that merely has the fields we look at (a
// mock, a half-built wrapper) says nothing trustworthy about where its server is.
function canConnect(client) {
  return typeof client.connect === 'function' && typeof client.on === 'function' &&
    (typeof client.quit === 'function' || typeof client.disconnect === 'function')
}

function isIoredis(client) {
  return typeof client.options === 'object' && client.options !== null &&
    typeof client.status === 'string' && typeof client.sendCommand === 'function'
}

function isNodeRedis(client) {
  return typeof client.options === 'object' && typeof client.sendCommand === 'function' &&
    'isOpen' in client
}

/** Refuses a client-shaped object that is not a real client of its library. */
function realClient(client, library, name) {
  if (!canConnect(client)) {
    throw invalidArgument(
      TypeError,
      name,
      `${expected(name)}; this object looks like a ${library} client but is not one (it cannot connect), so where its server is cannot be told`,
    )
  }
}

function isNodeRedisCluster(client) {
  return Array.isArray(client.masters) && client.nodeByAddress instanceof Map &&
    typeof client.sendCommand === 'function' && 'isOpen' in client
}

/**
 * One node of a cluster's list as ioredis's startupNodes and our `cluster` option take it: a
 * port (on localhost, as ioredis reads it), 'host:port', 'redis://host:port', or { host, port }.
 */
function clusterNode(node, name) {
  if (typeof node === 'number') return { host: 'localhost', port: node }
  if (typeof node === 'string') {
    let url
    try {
      url = new URL(node.includes('://') ? node : `redis://${node}`)
    } catch {
      throw invalidArgument(TypeError, name, `${name} must be 'host:port' or redis://host:port, got a string that is neither`)
    }
    if (!['redis:', 'rediss:'].includes(url.protocol) || url.hostname === '') {
      throw invalidArgument(TypeError, name, `${name} must be 'host:port' or redis://host:port`)
    }
    return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port === '' ? undefined : Number(url.port) }
  }
  if (node === null || typeof node !== 'object' || Array.isArray(node)) {
    throw invalidArgument(TypeError, name, `${name} must be a port, 'host:port' or { host, port }, got ${check.describe(node)}`)
  }
  check.optionalString(node.host, `${name}.host`)
  check.optionalNumber(node.port, `${name}.port`)
  return { host: node.host ?? 'localhost', port: node.port }
}

function clusterNodes(nodes, name) {
  if (!Array.isArray(nodes) || nodes.length === 0) {
    throw invalidArgument(TypeError, name, `${name} must be a non-empty array of cluster nodes, got ${check.describe(nodes)}`)
  }
  return nodes.map((node, i) => clusterNode(node, `${name}[${i}]`))
}

/**
 * ioredis's `natMap` ({ 'host:port': { host, port } }: where a node a cluster, or a master a
 * Sentinel set, announces at the key is reached) as the native side reads it, routes from one
 * address to the other; `undefined` for none. `field` names the option in errors. A function
 * is refused: the map is handed to the native client once.
 */
function natRoutes(natMap, field) {
  if (natMap === undefined || natMap === null) return undefined
  if (typeof natMap === 'function') {
    throw invalidArgument(TypeError, field, `${field} as a function is not supported: give it as an object { 'host:port': { host, port } }`)
  }
  if (typeof natMap !== 'object' || Array.isArray(natMap)) {
    throw invalidArgument(TypeError, field, `${field} must be an object { 'host:port': { host, port } }, got ${check.describe(natMap)}`)
  }
  const routes = Object.entries(natMap).map(([from, to]) => {
    const at = `${field}['${from}']`
    if (to === null || typeof to !== 'object' || typeof to.host !== 'string' || to.host === '') {
      throw invalidArgument(TypeError, at, `${at} must be { host, port }, got ${check.describe(to)}`)
    }
    if (to.port !== undefined && !(Number.isInteger(to.port) && to.port > 0 && to.port <= 65535)) {
      throw invalidArgument(RangeError, `${at}.port`, `${at}.port must be a whole number from 1 to 65535, got ${check.describe(to.port)}`)
    }
    return { from: clusterNode(from, `${field} key '${from}'`), to: { host: to.host, port: to.port } }
  })
  return routes.length > 0 ? routes : undefined
}

/** An ioredis `Cluster`: its startup nodes, and the node options every node connects with. */
function fromIoredisCluster(client, name) {
  realClient(client, 'ioredis', name)
  const o = client.options ?? {}
  const r = o.redisOptions ?? {}
  return {
    connection: {
      cluster: clusterNodes(client.startupNodes, `${name}.startupNodes`),
      natMap: natRoutes(o.natMap, `${name}.natMap`),
      ...tlsFields(r.tls, 'tls'),
      db: r.db || undefined,
      username: r.username || undefined,
      password: r.password || undefined,
    },
    clientKeyPrefix: o.keyPrefix || r.keyPrefix || undefined,
    fromClient: true,
  }
}

/**
 * A node-redis cluster (`createCluster`): its options are private, so what it found is read
 * once it is open: the masters (where a node's own client connects, its address map applied)
 * and the credentials and TLS a node's client was made with.
 */
function fromNodeRedisCluster(client, name) {
  if (!client.isOpen) {
    throw invalidArgument(TypeError, name, `${name} is a node-redis cluster that is not connected: await its connect() first, or pass { cluster: [...] }`)
  }
  const nodes = client.masters.map((node) => {
    const socket = node.client?.options?.socket ?? {}
    return { host: socket.host ?? node.host, port: socket.port ?? node.port }
  })
  const made = client.masters.find((node) => node.client?.options)?.client.options ?? {}
  const socket = made.socket ?? {}
  return {
    connection: {
      cluster: clusterNodes(nodes, `${name}.masters`),
      ...(socket.tls ? tlsFields(typeof socket.tls === 'object' ? { ...socket, ...socket.tls } : socket, 'socket') : {}),
      username: made.username || undefined,
      password: made.password || undefined,
    },
    fromClient: true,
  }
}

function fromIoredis(client, name) {
  if (client.isCluster) return fromIoredisCluster(client, name)
  realClient(client, 'ioredis', name)
  const o = client.options
  if (Array.isArray(o.sentinels) && o.sentinels.length > 0) {
    return { connection: sentinelConnection(o, name, 'ioredis'), clientKeyPrefix: o.keyPrefix || undefined, fromClient: true }
  }
  // ioredis fills in its defaults (localhost:6379), so a real client always names its server.
  if (!o.path && o.host === undefined && o.port === undefined) {
    throw invalidArgument(TypeError, name, `${expected(name)}; this ioredis client's options name no host, port or path`)
  }
  return {
    connection: {
      host: o.path ? undefined : o.host,
      port: o.path ? undefined : o.port,
      path: o.path || undefined,
      ...tlsFields(o.tls, 'tls'),
      db: o.db || undefined,
      username: o.username || undefined,
      password: o.password || undefined,
    },
    clientKeyPrefix: o.keyPrefix || undefined,
    fromClient: true,
  }
}

// node-redis's own defaults: a client made by createClient() with no address connects there.
const NODE_REDIS_HOST = 'localhost'
const NODE_REDIS_PORT = 6379

function fromNodeRedis(client, name) {
  realClient(client, 'node-redis', name)
  const o = client.options ?? {}
  const socket = o.socket ?? {}
  // Where the user's client itself connects, node-redis's defaults included: the locks belong
  // on the server the client talks to. A URL's own host and port are left to the URL.
  const own = (value, fallback) => (socket.path ? undefined : value ?? (o.url ? undefined : fallback))
  return {
    connection: {
      url: o.url || undefined,
      host: own(socket.host, NODE_REDIS_HOST),
      port: own(socket.port, NODE_REDIS_PORT),
      path: socket.path || undefined,
      // node-redis reads the TLS options from the socket object, and only when `tls` is set.
      ...(socket.tls ? tlsFields(typeof socket.tls === 'object' ? { ...socket, ...socket.tls } : socket, 'socket') : {}),
      db: o.database || undefined,
      username: o.username || undefined,
      password: o.password || undefined,
    },
    fromClient: true,
  }
}

/** The address fields an options object must name at least one of: we never guess a server. */
const ADDRESS_FIELDS = ['host', 'port', 'path', 'url', 'sentinels']

/**
 * A Sentinel set, as ioredis names its options (`sentinels`, `name`, `role`,
 * `sentinelUsername`, `sentinelPassword`, `sentinelTLS`, `natMap`), from an ioredis client's options
 * (`from: 'ioredis'`, already checked by ioredis) or a plain object. One TLS setting serves
 * the master and the sentinels.
 */
function sentinelConnection(o, name, from) {
  const field = (option) => (from === 'ioredis' ? option : `${name}.${option}`)
  if (!Array.isArray(o.sentinels) || o.sentinels.length === 0) {
    throw invalidArgument(TypeError, field('sentinels'), `${field('sentinels')} must be a non-empty array of { host, port }`)
  }
  for (const other of ['url', 'host', 'port', 'path', 'cluster']) {
    if (from !== 'ioredis' && o[other] !== undefined) {
      throw invalidArgument(TypeError, field(other), `${field(other)} cannot come with sentinels: the sentinels name the master`)
    }
  }
  const sentinels = o.sentinels.map((node, i) => {
    const at = `${field('sentinels')}[${i}]`
    if (node === null || typeof node !== 'object' || typeof node.host !== 'string' || node.host.length === 0) {
      throw invalidArgument(TypeError, at, `${at} must be { host, port } with a host name or address, got ${check.describe(node)}`)
    }
    if (node.port !== undefined && !(Number.isInteger(node.port) && node.port > 0 && node.port <= 65535)) {
      throw invalidArgument(RangeError, `${at}.port`, `${at}.port must be a whole number from 1 to 65535, got ${node.port}`)
    }
    return { host: node.host, port: node.port }
  })
  if (typeof o.name !== 'string' || o.name.length === 0) {
    throw invalidArgument(TypeError, field('name'), `${field('name')} must name the master the sentinels watch (a non-empty string), got ${check.describe(o.name)}`)
  }
  if (o.role !== undefined && o.role !== 'master') {
    throw invalidArgument(TypeError, field('role'), `${field('role')} must be 'master': locks are kept on the master, never read from a replica`)
  }
  check.optionalString(o.sentinelUsername, field('sentinelUsername'))
  check.optionalString(o.sentinelPassword, field('sentinelPassword'))
  const sentinelTls = o.sentinelTLS ?? (o.enableTLSForSentinelMode ? o.tls : undefined)
  if (Boolean(sentinelTls) !== Boolean(o.tls)) {
    throw invalidArgument(TypeError, field('sentinelTLS'), `${field('sentinelTLS')} and ${field('tls')} must be given together: one TLS setting serves the master and the sentinels`)
  }
  const tls = tlsFields(o.tls, field('tls'))
  // `sentinelTLS: true` takes `tls`'s CA and certificate; other settings of its own would be
  // dropped unseen, since the master's serve the sentinels too.
  if (typeof sentinelTls === 'object' && sentinelTls !== o.tls &&
      JSON.stringify(tlsFields(sentinelTls, field('sentinelTLS'))) !== JSON.stringify(tls)) {
    throw invalidArgument(TypeError, field('sentinelTLS'), `${field('sentinelTLS')} must give what ${field('tls')} gives (or be true): one TLS setting, its CA and client certificate, serves the master and the sentinels`)
  }
  return {
    sentinels,
    sentinelName: o.name,
    sentinelUsername: o.sentinelUsername || undefined,
    sentinelPassword: o.sentinelPassword || undefined,
    natMap: natRoutes(o.natMap, field('natMap')),
    ...tls,
    db: o.db || undefined,
    username: o.username || undefined,
    password: o.password || undefined,
  }
}

/** Whether `o` (a plain object) says where to connect. */
function namesAnAddress(o) {
  return ADDRESS_FIELDS.some((field) => o[field] !== undefined) || o.cluster !== undefined
}

function fromObject(o, name) {
  if (!namesAnAddress(o)) {
    throw invalidArgument(
      TypeError,
      name,
      `${expected(name)}; this object names none of them, and no server is ever guessed`,
    )
  }
  if (o.sentinels !== undefined) {
    check.optionalString(o.username, `${name}.username`)
    check.optionalString(o.password, `${name}.password`)
    check.optionalNumber(o.db, `${name}.db`)
    return { connection: sentinelConnection(o, name, 'object') }
  }
  check.optionalString(o.url, `${name}.url`)
  check.optionalString(o.host, `${name}.host`)
  check.optionalNumber(o.port, `${name}.port`)
  check.optionalString(o.path, `${name}.path`)
  check.optionalString(o.username, `${name}.username`)
  check.optionalString(o.password, `${name}.password`)
  check.optionalNumber(o.db, `${name}.db`)
  if (o.tls === null) {
    throw invalidArgument(TypeError, `${name}.tls`, `${name}.tls must be a boolean or a TLS options object, got null`)
  }
  for (const [field, value] of [[`${name}.port`, o.port], [`${name}.db`, o.db]]) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 0)) {
      throw invalidArgument(RangeError, field, `${field} must be a whole number of 0 or more, got ${value}`)
    }
  }
  return {
    connection: {
      url: o.url,
      host: o.host,
      port: o.port,
      path: o.path,
      cluster: o.cluster === undefined ? undefined : clusterNodes(o.cluster, `${name}.cluster`),
      natMap: natRoutes(o.natMap, `${name}.natMap`),
      // `tls: false` is passed on, so that it cannot quietly turn a rediss:// URL into plain text.
      ...(o.tls === false ? { tls: false } : tlsFields(o.tls, `${name}.tls`)),
      db: o.db,
      username: o.username,
      password: o.password,
    },
  }
}

/**
 * `{ connection, clientKeyPrefix }` for the native constructor. `clientKeyPrefix` is the
 * ioredis `keyPrefix`, which ioredis silently adds to every key the original package wrote.
 */
// The native side takes 32-bit numbers; a larger one would silently wrap around.
function checkRanges(result, name) {
  const { port, db } = result.connection
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) {
    throw invalidArgument(RangeError, `${name}.port`, `${name}.port must be a whole number from 0 to 65535, got ${port}`)
  }
  if (db !== undefined && !(Number.isInteger(db) && db >= 0 && db <= 2 ** 31 - 1)) {
    throw invalidArgument(RangeError, `${name}.db`, `${name}.db must be a database index of 0 or more, got ${db}`)
  }
  return result
}

/**
 * Where to connect, read from what the user passed as `name`: a client we can read, a URL,
 * or options naming an address. Anything else throws a TypeError (EINVAL) naming `name`,
 * never a guess at a default server.
 */
function connectionOptions(input, name = 'redis', { redlock = false } = {}) {
  if (Array.isArray(input)) return redlockOptions(input, name, redlock)
  const read = checkRanges(readConnection(input, name), name)
  // Where a URL the native side refuses came from, to name it as the caller wrote it.
  read.urlArgument = typeof input === 'string' || read.fromClient ? name : `${name}.url`
  return read
}

/**
 * An array of servers: a Redlock over them, each element read as a single connection is.
 * The count, duplicates and memory:// nodes are the native side's to refuse (it names the
 * node); here, what only the JS objects tell: a node that is not one server, and ioredis
 * clients whose keyPrefix differ (the lock would have different keys on different nodes).
 */
function redlockOptions(nodes, name, offered) {
  if (!offered) {
    throw invalidArgument(TypeError, name, `${name} must be one server here: an array of servers (a Redlock) is not supported by this API, got an array of ${nodes.length}`)
  }
  const reads = nodes.map((node, i) => connectionOptions(node, `${name}[${i}]`))
  const cluster = reads.findIndex((read) => read.connection.cluster !== undefined)
  if (cluster >= 0) {
    throw invalidArgument(TypeError, `${name}[${cluster}]`, `${name}[${cluster}] is a Redis Cluster: a Redlock's nodes are independent servers, one each`)
  }
  const prefixes = reads.map((read) => read.clientKeyPrefix)
  const odd = prefixes.findIndex((prefix) => prefix !== prefixes[0])
  if (odd > 0) {
    throw invalidArgument(TypeError, `${name}[${odd}]`, `${name}[${odd}] has keyPrefix ${JSON.stringify(prefixes[odd] ?? '')} but ${name}[0] has ${JSON.stringify(prefixes[0] ?? '')}: a Redlock's nodes must hold the same keys`)
  }
  return {
    connection: { nodes: reads.map((read) => read.connection) },
    clientKeyPrefix: prefixes[0],
    nodes: reads,
    urlArgument: name,
  }
}

/**
 * A URL as it may be printed: its password (or lone userinfo) and any password parameter
 * hidden; `undefined` for a string with no scheme, of which no part can be told safe to show.
 */
function redactUrl(url) {
  const scheme = url.indexOf('://')
  if (scheme < 0) return undefined
  const start = scheme + 3
  const end = url.slice(start).search(/[/?#]/)
  const authority = end < 0 ? url.slice(start) : url.slice(start, start + end)
  const at = authority.lastIndexOf('@')
  let shown = url
  if (at >= 0) {
    const userinfo = authority.slice(0, at)
    const colon = userinfo.indexOf(':')
    const hidden = colon >= 0 ? `${userinfo.slice(0, colon)}:***` : '***'
    shown = url.slice(0, start) + hidden + url.slice(start + at)
  }
  shown = shown.replace(/([?&][^=&#]*pass[^=&#]*=)[^&#]*/gi, '$1***')
  // Control and non-ASCII characters are shown escaped: a message must not carry them raw.
  shown = shown.replace(/[^\x20-\x7e]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`)
  return shown.length > 200 ? `${shown.slice(0, 200)}...` : shown
}

/**
 * The native side names the connection argument `redis`; this names it as the caller's API
 * does (`read` from connectionOptions), and shows the refused URL with its secrets hidden.
 */
function connectionError(err, read) {
  if (err?.code !== 'EINVAL' || err.argument !== 'redis' || read === undefined) return err
  const argument = read.urlArgument
  const before = err.message
  // A Redlock node's refusal ('redis[1]: ...' or 'redis[1] ...') names that node, its URL shown.
  const node = read.nodes && /^redis\[(\d+)\]/.exec(before)
  const url = node ? read.nodes[Number(node[1])]?.connection.url : read.connection.url
  err.argument = node ? `${argument}[${node[1]}]` : argument
  if (node) err.message = `${argument}${err.message.slice('redis'.length)}`.replace(/^([^:]*\]): redis /, '$1 ')
  else if (err.message.startsWith('redis ')) err.message = `${argument} ${err.message.slice('redis '.length)}`
  // The native message may already show the refused part (a memory:// name, escaped).
  if (typeof url === 'string' && !/\bgot '/.test(before)) {
    const shown = redactUrl(url)
    err.message += shown === undefined ? ', got a string with no scheme:// (not shown: it may hold a password)' : `, got "${shown}"`
  }
  // A stack already written out holds the native message: its first line says what the message says.
  const head = `${err.name}: ${before}\n`
  if (typeof err.stack === 'string' && err.stack.startsWith(head)) err.stack = `${err.name}: ${err.message}\n${err.stack.slice(head.length)}`
  return err
}

function readConnection(input, name) {
  if (typeof input === 'string') {
    if (input.length === 0) throw invalidArgument(TypeError, name, `${expected(name)}, got an empty string`)
    return { connection: { url: input } }
  }
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw invalidArgument(TypeError, name, `${expected(name)}, got ${check.describe(input)}`)
  }
  if (isIoredis(input)) return fromIoredis(input, name)
  if (isNodeRedis(input)) return fromNodeRedis(input, name)
  if (isNodeRedisCluster(input)) return fromNodeRedisCluster(input, name)
  if (typeof input.sendCommand === 'function' || typeof input.set === 'function') {
    throw invalidArgument(TypeError, name, `${expected(name)}; this client type is not recognised`)
  }
  return fromObject(input, name)
}

module.exports = { connectionOptions, connectionError, redactUrl, expected }
