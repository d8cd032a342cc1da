'use strict'

// A Redis Cluster for the command line: the masters the seeds name (CLUSTER SLOTS; replicas
// are never read), a connection to each opened when first needed, and each key's command sent
// to the master of its slot. One MOVED or ASK is followed: a MOVED re-reads the slot table
// first, so the calls after it go to the new master too. Every call is bounded by the timeout
// of the connection it goes through (lib/cli/resp.js).

const { connect: connectServer, ReplyError, text } = require('./resp')
const { CliError, EXIT } = require('./errors')
const { hostPort } = require('./host-list')
const { keySlot } = require('./key-slot')

/** The key a command names: EVAL's first key, else its first argument (SSUBSCRIBE's channel). */
function keyOf(args) {
  return String(args[0]).toUpperCase() === 'EVAL' ? args[3] : args[1]
}

/** `host:port` of a MOVED or ASK answer; an empty host is the host of the node that answered. */
function redirectedTo(where, via) {
  const colon = where.lastIndexOf(':')
  const host = where.slice(0, colon).replace(/^\[(.*)\]$/, '$1')
  return { host: host || via.host, port: Number(where.slice(colon + 1)) }
}

/**
 * A refusal of the cluster's own (down, a slot on the move twice over): the node named, exit
 * 4, marked `transient` (`watch` tries a subscription again at its next refresh). Any other
 * refusal is the command's, left to the caller (a WRONGTYPE, say).
 */
function unavailable(err, at) {
  if (!(err instanceof ReplyError) || !/^(CLUSTERDOWN|TRYAGAIN|MOVED|ASK)\b/.test(err.message)) return err
  const refusal = new CliError(EXIT.unreachable, `cluster node ${hostPort(at)} answered ${err.message}`)
  refusal.transient = true
  return refusal
}

class ClusterClient {
  /** `table`: the client whose slot table routes this one's calls (itself, unless given). */
  constructor(address, { timeoutMs }, table = null) {
    this.address = address
    this.timeoutMs = timeoutMs
    this.nodes = new Map() // 'host:port' -> Promise<RespClient>
    this.slots = [] // [{ from, to, master: { host, port } }], read when table is this
    this.table = table ?? this
    this.refreshing = null
    // Nodes whose connection failed last: asked for the slot table after the others.
    this.lost = new Set()
    this.closed = false
    // Set by `watch`: what a node's connection pushes (a sharded message), and its loss.
    this.onPush = null
    this.onClose = null
  }

  /** A node's connection, opened on first use with the URL's credentials (database 0). */
  node(at) {
    const name = hostPort(at)
    let client = this.nodes.get(name)
    if (client) return client
    const a = this.address
    const lost = this.table.lost
    // A connection that failed is dropped: the next call to its node opens a new one.
    const forget = () => {
      if (this.nodes.get(name) === client) this.nodes.delete(name)
      lost.add(name)
    }
    client = connectServer({ host: at.host, port: at.port, tls: a.tls, tlsFiles: a.tlsFiles, username: a.username, password: a.password, db: 0, shown: `cluster node ${name}` },
      { timeoutMs: this.timeoutMs }).then((c) => {
      if (this.closed) {
        c.close()
        throw new CliError(EXIT.failed, 'the cluster connection is closed')
      }
      lost.delete(name)
      // Only a subscriber's connections hear pushes: on the others every array is a reply.
      if (this.table !== this) c.onPush = (push) => this.onPush && this.onPush(push)
      c.onClose = (err) => {
        forget()
        if (this.onClose) this.onClose(err)
      }
      return c
    })
    client.catch(forget)
    this.nodes.set(name, client)
    return client
  }

  /** Reads the slot table from the first of `candidates` that answers; throws every reason. */
  async readSlots(candidates) {
    const reasons = []
    for (const at of candidates) {
      try {
        const reply = await (await this.node(at)).call('CLUSTER', 'SLOTS')
        const slots = []
        for (const range of Array.isArray(reply) ? reply : []) {
          const master = Array.isArray(range) ? range[2] : null
          if (!Array.isArray(master) || master.length < 2) continue
          // A node that does not know its own address announces '' or '?': it is where we asked.
          const host = ['', '?'].includes(text(master[0])) ? at.host : text(master[0])
          slots.push({ from: Number(range[0]), to: Number(range[1]), master: { host, port: Number(master[1]) } })
        }
        if (slots.length === 0) throw new Error(`${hostPort(at)} names no master serving a slot`)
        this.slots = slots
        return
      } catch (err) {
        if (err instanceof ReplyError) reasons.push(`${hostPort(at)} answered ${err.message}`)
        else reasons.push(err.message)
      }
    }
    throw new CliError(EXIT.unreachable, `no node of ${this.address.shown} answered CLUSTER SLOTS (${reasons.join('; ')})`)
  }

  /**
   * Re-reads the slot table: from the masters known, then from the seeds. A subscriber's
   * connections cannot ask (RESP2 allows them only (un)subscribing): its table's client does.
   */
  refresh() {
    if (this.table !== this) return this.table.refresh()
    // The MOVED answers of one pipelined round share one reading.
    if (!this.refreshing) {
      const known = this.masterAddresses()
      const seeds = this.address.seeds.filter((s) => !known.some((m) => hostPort(m) === hostPort(s)))
      const candidates = [...known, ...seeds]
      const lost = (at) => this.lost.has(hostPort(at))
      const ordered = [...candidates.filter((at) => !lost(at)), ...candidates.filter(lost)]
      this.refreshing = this.readSlots(ordered).finally(() => { this.refreshing = null })
    }
    return this.refreshing
  }

  masterAddresses() {
    const byName = new Map(this.table.slots.map((s) => [hostPort(s.master), s.master]))
    return [...byName.values()]
  }

  /** Every master's connection, for SCAN: all of them, or the one-line reason one failed. */
  masters() {
    return Promise.all(this.masterAddresses().map((at) => this.node(at)))
  }

  masterOf(slot) {
    const range = this.table.slots.find((s) => slot >= s.from && slot <= s.to)
    if (!range) throw new CliError(EXIT.unreachable, `no master of ${this.address.shown} serves slot ${slot}`)
    return range.master
  }

  /** One command on the master of its key's slot, following one MOVED or ASK. */
  async call(...args) {
    const at = this.masterOf(keySlot(keyOf(args)))
    try {
      return await (await this.node(at)).call(...args)
    } catch (err) {
      const redirect = err instanceof ReplyError && /^(MOVED|ASK) \d+ (\S+)$/.exec(err.message)
      if (!redirect) throw unavailable(err, at)
      if (redirect[1] === 'MOVED') await this.refresh()
      const to = redirectedTo(redirect[2], at)
      const target = await this.node(to)
      if (redirect[1] === 'MOVED') return target.call(...args).catch((again) => { throw unavailable(again, to) })
      // ASKING admits the one command written right after it on the same connection.
      const [, reply] = await Promise.all([target.call('ASKING'), target.call(...args)]).catch((again) => { throw unavailable(again, to) })
      return reply
    }
  }

  /** A client with connections of its own, for SSUBSCRIBE, routed by this one's slot table. */
  subscriber() {
    return new ClusterClient(this.address, { timeoutMs: this.timeoutMs }, this)
  }

  close() {
    this.closed = true
    for (const client of this.nodes.values()) client.then((c) => c.close(), () => {})
  }
}

/** Connects to the cluster `address` (lib/cli/host-list.js) names: its slot table read. */
async function connectCluster(address, { timeoutMs }) {
  const cluster = new ClusterClient(address, { timeoutMs })
  try {
    await cluster.readSlots(address.seeds)
  } catch (err) {
    cluster.close()
    throw err
  }
  return cluster
}

module.exports = { connectCluster }
