'use strict'

// A Redis Cluster on loopback for the tests: masters and a replica each, every node a
// RedisServer on free ports (its bus port too), joined by `redis-cli --cluster create`, each
// stopped by its pid. redis-cli comes with redis-server (Debian: redis-tools). With `password`,
// every node requires it (`requirepass`) and replicas give it to their master (`masterauth`);
// `user` ({ name, password }) adds an ACL user with every right on every node; `args` are
// added to every node's command line. With `tls: certs` (helpers/tls-certs.js), every node
// speaks TLS only, with the private CA's server certificate, on its client port, its bus and
// its replication link (`tls-cluster`, `tls-replication`); with `mtls: true` as well, each node
// also asks its clients for a certificate of the CA (`tls-auth-clients`), and this helper shows
// the CA's client certificate.

const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const Redis = require('ioredis')
const { RedisServer, freePort } = require('./redis-server')
const { TlsRedisServer } = require('./tls-certs')
const { slot } = require('./keys')

const run = promisify(execFile)

class RedisCluster {
  constructor({ masters = 3, replicas = 1, password, user, args = [], tls, mtls = false } = {}) {
    this.tls = tls
    this.mtls = mtls
    this.extraArgs = args
    this.masterCount = masters
    this.replicas = replicas
    this.password = password
    this.user = user
    this.nodes = []
  }

  static async start(options) {
    return new RedisCluster(options).start()
  }

  async start() {
    try {
      return await this.#start()
    } catch (err) {
      // The nodes started so far stopped: a test process that keeps a child alive never exits.
      await this.close()
      throw err
    }
  }

  async #start() {
    const count = this.masterCount * (1 + this.replicas)
    for (let i = 0; i < count; i++) {
      const bus = await freePort()
      const Server = this.tls ? TlsRedisServer : RedisServer
      const node = new Server({
        certs: this.tls,
        authClients: this.mtls,
        args: [...this.#tlsArgs(), '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000', '--cluster-port', String(bus),
          // A replica's full sync waits 5 s by default for more replicas to share it (see
          // redis-sentinel.js REPLICATION); none comes here.
          '--repl-diskless-sync-delay', '0',
          ...(this.password ? ['--masterauth', this.password] : []), ...this.extraArgs],
        password: this.password,
      })
      this.nodes.push(node)
      await node.start()
    }
    if (this.user) {
      const { name, password } = this.user
      for (const node of this.nodes) await this.command(node.port, 'ACL', 'SETUSER', name, 'on', `>${password}`, '~*', '&*', '+@all')
    }
    const addrs = this.nodes.map((n) => `127.0.0.1:${n.port}`)
    const auth = [...(this.password ? ['-a', this.password, '--no-auth-warning'] : []), ...(this.tls ? ['--tls', '--cacert', this.tls.caFile] : []),
      ...(this.mtls ? ['--cert', this.tls.client.certFile, '--key', this.tls.client.keyFile] : [])]
    try {
      await run('redis-cli', [...auth, '--cluster', 'create', ...addrs, '--cluster-replicas', String(this.replicas), '--cluster-yes'], { timeout: 20_000 })
    } catch (err) {
      throw new Error(`redis-cli --cluster create failed (redis-cli comes with redis-server): ${err.message}`)
    }
    await this.waitOk()
    return this
  }

  /**
   * With `tls`: the bus and replication over TLS. A node dialling another's bus shows a
   * certificate, which the bus always checks: the client one (the server certificate is for
   * serverAuth only).
   */
  #tlsArgs() {
    if (!this.tls) return []
    const { client } = this.tls
    return ['--tls-cluster', 'yes', '--tls-replication', 'yes', '--tls-client-cert-file', client.certFile, '--tls-client-key-file', client.keyFile]
  }

  /** One command on the node at `port`, on a connection of its own; replies as strings. */
  command(port, ...args) {
    return this.#send(port, 'call', args)
  }

  /** `command`, replies as Buffers (our sibling keys hold the byte 0xFF). */
  commandBuffer(port, ...args) {
    return this.#send(port, 'callBuffer', args)
  }

  async #send(port, how, args) {
    const tls = this.tls && { ca: this.tls.ca, ...(this.mtls ? { cert: this.tls.client.cert, key: this.tls.client.key } : {}) }
    const client = new Redis({ port, host: '127.0.0.1', password: this.password, tls, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null })
    client.on('error', () => {})
    try {
      await client.connect()
      return await client[how](...args)
    } finally {
      client.disconnect()
    }
  }

  /** Until every live node says the cluster is ok with all its masters, each replica linked. */
  async waitOk(timeoutMs = 20_000) {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const live = this.nodes.filter((n) => n.child && n.child.exitCode === null && n.child.signalCode === null)
      const states = await Promise.all(live.map(async (n) => {
        try {
          const info = await this.command(n.port, 'CLUSTER', 'INFO')
          const repl = await this.command(n.port, 'INFO', 'replication')
          return info.includes('cluster_state:ok') && info.includes(`cluster_size:${this.masterCount}`) &&
            (repl.includes('role:master') || repl.includes('master_link_status:up'))
        } catch {
          return false
        }
      }))
      if (states.every(Boolean) && (await this.slotMap()).length === this.masterCount) return
      if (Date.now() > deadline) throw new Error('the cluster did not become ok')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  /** [{ port, ranges: [[from, to]] }] of each master, as a live node sees them. */
  async slotMap() {
    for (const node of this.nodes) {
      let slots
      try {
        slots = await this.command(node.port, 'CLUSTER', 'SLOTS')
      } catch {
        continue
      }
      const map = new Map()
      for (const [from, to, master] of slots) {
        const port = master[1]
        if (!map.has(port)) map.set(port, [])
        map.get(port).push([from, to])
      }
      return [...map].map(([port, ranges]) => ({ port, ranges })).sort((a, b) => a.port - b.port)
    }
    return []
  }

  async masterPorts() {
    return (await this.slotMap()).map((m) => m.port)
  }

  async masterOf(key) {
    const s = slot(key)
    const map = await this.slotMap()
    return map.find((m) => m.ranges.some(([a, b]) => s >= a && s <= b))?.port
  }

  /** A key `<prefix><n>` whose `<lockPrefix><key>` is served by the master at `port`. */
  async keyOn(port, prefix, lockPrefix = '') {
    const map = await this.slotMap()
    const ranges = map.find((m) => m.port === port).ranges
    for (let n = 0; ; n++) {
      const key = `${prefix}${n}`
      const s = slot(`${lockPrefix}${key}`)
      if (ranges.some(([a, b]) => s >= a && s <= b)) return key
    }
  }

  /**
   * Moves slot `s` from the master at `from` to the one at `to`, keys and all, `batch` keys a
   * step with `pauseMs` between steps, so that calls meet the slot half-moved. `beforeHandover`
   * runs once every key is on `to` and `from` still owns the slot (MIGRATING, `to` IMPORTING).
   */
  async migrate(s, from, to, { batch = 10, pauseMs = 30, beforeHandover } = {}) {
    const fromId = await this.command(from, 'CLUSTER', 'MYID')
    const toId = await this.command(to, 'CLUSTER', 'MYID')
    await this.command(to, 'CLUSTER', 'SETSLOT', s, 'IMPORTING', fromId)
    await this.command(from, 'CLUSTER', 'SETSLOT', s, 'MIGRATING', toId)
    for (;;) {
      const keys = await this.commandBuffer(from, 'CLUSTER', 'GETKEYSINSLOT', s, batch)
      if (keys.length === 0) break
      const auth = this.password ? ['AUTH', this.password] : []
      await this.command(from, 'MIGRATE', '127.0.0.1', to, '', 0, 5000, ...auth, 'KEYS', ...keys)
      await new Promise((resolve) => setTimeout(resolve, pauseMs))
    }
    await beforeHandover?.()
    for (const port of await this.masterPorts()) await this.command(port, 'CLUSTER', 'SETSLOT', s, 'NODE', toId)
  }

  /**
   * Through `locks` (keys under `lock:`), each of `keys` ([port, key]) locked, its token found
   * on the master at port, refused to a second taker, released and gone from there.
   */
  async lockEach(locks, keys, label) {
    const assert = require('node:assert/strict')
    for (const [port, key] of keys) {
      const handle = await locks.acquire(key, 10_000)
      assert.equal(await this.command(port, 'GET', `lock:${key}`), handle.token, `${label}: held on ${port}`)
      assert.equal(await locks.tryAcquire(key, 1000), null)
      await handle.release()
      assert.equal(await this.command(port, 'EXISTS', `lock:${key}`), 0, `${label}: released on ${port}`)
    }
  }

  node(port) {
    return this.nodes.find((n) => n.port === port)
  }

  /** The replica of the master at `port`. */
  async replicaOf(port) {
    const id = (await this.command(port, 'CLUSTER', 'MYID'))
    for (const node of this.nodes) {
      if (node.port === port) continue
      try {
        const repl = await this.command(node.port, 'CLUSTER', 'NODES')
        const me = repl.split('\n').find((line) => line.includes('myself'))
        if (me && me.split(' ')[3] === id) return node
      } catch {}
    }
    return undefined
  }

  get url() {
    const auth = this.password ? `:${encodeURIComponent(this.password)}@` : ''
    return `${this.tls ? 'rediss' : 'redis'}+cluster://${auth}${this.nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`
  }

  get seeds() {
    return this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port }))
  }

  async close() {
    await Promise.all(this.nodes.map((n) => n.close()))
  }
}

module.exports = { RedisCluster }
