'use strict'

// A connection to the server an address names: the server itself, the master a Sentinel
// set names now, or a Redis Cluster's masters (lib/cli/cluster.js). The sentinels are asked
// in turn, each bounded by the timeout, and the server named is used only once it answers
// ROLE as a master (a sentinel may lag a failover).

const { connect: connectServer, text } = require('./resp')
const { CliError, EXIT } = require('./errors')
const { connectCluster } = require('./cluster')
const { hostPort } = require('./host-list')

/** Asks one sentinel for the master; resolves `{ host, port }` or throws why not (one line). */
async function askSentinel(address, sentinel, timeoutMs) {
  const shown = `sentinel ${hostPort(sentinel)}`
  const client = await connectServer({
    host: sentinel.host,
    port: sentinel.port,
    tls: address.tls,
    tlsFiles: address.tlsFiles,
    username: address.sentinelUsername,
    password: address.sentinelPassword,
    db: 0,
    shown,
  }, { timeoutMs })
  try {
    const reply = await client.call('SENTINEL', 'get-master-addr-by-name', address.name).catch((err) => {
      if (err instanceof CliError) throw err
      throw new Error(`${shown} answered ${err.message}`)
    })
    if (!Array.isArray(reply) || reply.length !== 2) throw new Error(`${shown} does not know "${address.name}"`)
    return { host: text(reply[0]), port: Number(text(reply[1])) }
  } finally {
    client.close()
  }
}

async function connectMaster(address, { timeoutMs }) {
  const reasons = []
  for (const sentinel of address.sentinels) {
    const at = hostPort(sentinel)
    let master
    try {
      master = await askSentinel(address, sentinel, timeoutMs)
    } catch (err) {
      reasons.push(err.message)
      continue
    }
    const named = hostPort(master)
    const client = await connectServer({
      host: master.host,
      port: master.port,
      tls: address.tls,
      tlsFiles: address.tlsFiles,
      username: address.username,
      password: address.password,
      db: address.db,
      shown: `master ${named}`,
    }, { timeoutMs }).catch((err) => {
      reasons.push(`sentinel ${at} named ${named}: ${err.message}`)
      return null
    })
    if (!client) continue
    const role = await client.call('ROLE').catch((err) => err)
    const first = Array.isArray(role) ? text(role[0]) : null
    if (first === 'master') return client
    client.close()
    reasons.push(`sentinel ${at} named ${named}, which is ${first ? `a ${first}` : `answering ROLE with ${role instanceof Error ? role.message : 'no role'}`}`)
  }
  throw new CliError(EXIT.unreachable,
    `no sentinel of ${address.shown} named a reachable master "${address.name}" (${reasons.join('; ')})`)
}

/** Connects to what `address` (lib/cli/address.js) names. */
function connect(address, options) {
  if (address.seeds) return connectCluster(address, options)
  return address.sentinels ? connectMaster(address, options) : connectServer(address, options)
}

module.exports = { connect }
