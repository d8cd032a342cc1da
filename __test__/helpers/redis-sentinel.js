'use strict'

// A Sentinel set for one test file: a master, one replica and three sentinels, each a
// redis-server of its own (sentinels as `redis-server <conf> --sentinel`: the machine has no
// redis-sentinel binary), on free loopback ports, stopped by pid. Ready when every sentinel
// names the master, sees the replica and knows the two other sentinels (a failover needs them).
// `{ password, nat: true }`: the data servers ask for a password, and each is announced (to the
// sentinels, and through them to clients) at a forwarder that admits only the set's own
// processes, which dial from 127.0.0.2 (`bind-source-addr`): a client on 127.0.0.1 reaches the
// servers only through the forwarders `natMap` names (`mappedPort`).
// `{ tls: certs }` (helpers/tls-certs.js): every server and sentinel speaks TLS only, with the
// private CA's server certificate, and replicates and monitors over TLS (`tls-replication`);
// with `mtls: true` each also asks its clients for a certificate of the CA, and shows its own
// (`certs.client`) to the servers and sentinels it dials.
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const Redis = require('ioredis')
const { RedisServer, freePort, redisServerBinary, track } = require('./redis-server')
const { TcpProxy } = require('./tcp-proxy')
const { TlsRedisServer, waitUntilTlsReady } = require('./tls-certs')

const NAME = 'mymaster'
/**
 * Every data server's replication settings. Redis 7 streams a full sync's RDB to the socket
 * only after waiting `repl-diskless-sync-delay` (5 s by default) for more replicas to share
 * it; none ever comes here, so each sync took 5-6 s of the 10-15 s the waits below allow,
 * and one tried again after a failed first attempt 11-12 s. Without the delay a replica
 * syncs in tens of ms. `swapdb`: the replica loads the RDB from the socket rather than
 * writing it to a file of the test's directory and fsyncing it first, so a busy disk cannot
 * stall it either.
 */
const REPLICATION = ['--repl-diskless-sync-delay', '0', '--repl-diskless-load', 'swapdb']
/** The source address the set's own processes dial from when it sits behind NAT. */
const INSIDE = '127.0.0.2'
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` (async, truthy when done) every 50 ms until `timeoutMs`, then throws `what`. */
async function until(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      if (await check()) return
    } catch {}
    if (Date.now() > deadline) throw new Error(`${typeof what === 'function' ? what() : what} within ${timeoutMs} ms`)
    await sleep(50)
  }
}

/**
 * One sentinel: its config file written here, as Sentinel rewrites it. `name` and
 * `downAfterMs` let a test start one watching another server under a name of its own;
 * `authPass`, one whose master asks for a password; `inside`, one dialling from
 * `INSIDE` (and telling the others to reach it at 127.0.0.1).
 */
class SentinelServer extends RedisServer {
  constructor(masterPort, { name = NAME, downAfterMs = 1000, authPass, inside = false, certs, mtls = false } = {}) {
    super()
    this.masterPort = masterPort
    this.masterName = name
    this.downAfterMs = downAfterMs
    this.authPass = authPass
    this.inside = inside
    this.certs = certs
    this.mtls = mtls
  }

  /** Its listening lines: TLS only with `certs`, the other sentinels and the servers too. */
  listenLines() {
    if (!this.certs) return [`port ${this.port}`]
    const { server, client, caFile } = this.certs
    return ['port 0', `tls-port ${this.port}`, `tls-cert-file ${server.certFile}`, `tls-key-file ${server.keyFile}`,
      `tls-ca-cert-file ${caFile}`, 'tls-replication yes',
      ...(this.mtls ? ['tls-auth-clients yes', `tls-client-cert-file ${client.certFile}`, `tls-client-key-file ${client.keyFile}`] : ['tls-auth-clients no'])]
  }

  waitReady() {
    if (!this.certs) return super.waitReady()
    const { ca, client } = this.certs
    return waitUntilTlsReady(this.port, { ca, ...(this.mtls ? { cert: client.cert, key: client.key } : {}) }, this.child)
  }

  async start() {
    this.port ??= await freePort()
    const conf = path.join(this.dir, 'sentinel.conf')
    fs.writeFileSync(conf, [
      ...this.listenLines(),
      'bind 127.0.0.1',
      `dir ${this.dir}`,
      'sentinel resolve-hostnames no',
      `sentinel monitor ${this.masterName} 127.0.0.1 ${this.masterPort} 2`,
      `sentinel down-after-milliseconds ${this.masterName} ${this.downAfterMs}`,
      `sentinel failover-timeout ${this.masterName} 3000`,
      ...(this.authPass ? [`sentinel auth-pass ${this.masterName} ${this.authPass}`] : []),
      ...(this.inside ? [`bind-source-addr ${INSIDE}`, 'sentinel announce-ip 127.0.0.1', 'protected-mode no'] : []),
      '',
    ].join('\n'))
    const child = spawn(redisServerBinary(), [conf, '--sentinel'], { stdio: ['ignore', 'ignore', 'inherit'] })
    this.child = child
    track(child)
    const failed = new Promise((_, reject) => child.once('error', (err) => reject(new Error(`cannot start a sentinel: ${err.message}`))))
    await Promise.race([this.waitReady(), failed])
    return this
  }
}

class RedisSentinelSet {
  constructor({ password, nat = false, tls, mtls = false } = {}) {
    this.name = NAME
    this.password = password
    this.nat = nat
    this.tls = tls
    this.mtls = mtls
    this.servers = []
    this.sentinels = []
    this.clients = []
    /** With `nat`: per data server's port, its `announced` and `mapped` forwarders. */
    this.forwarders = new Map()
  }

  static async start(options) {
    const set = new RedisSentinelSet(options)
    try {
      await set.#start()
    } catch (err) {
      await set.close()
      throw err
    }
    return set
  }

  async #start() {
    const master = await this.#server()
    this.servers.push(master)
    master.extraArgs.push(...REPLICATION)
    await master.start()
    const replica = await this.#server()
    this.servers.push(replica)
    await this.rejoin(replica, master.port)
    await until(async () => /master_link_status:up/.test(await this.client(replica.port).info('replication')), 10_000, 'the replica did not sync')
    const sentinel = { authPass: this.password, inside: this.nat, certs: this.tls, mtls: this.mtls }
    for (let i = 0; i < 3; i++) this.sentinels.push(await new SentinelServer(this.seen(master.port), sentinel).start())
    await until(async () => {
      for (const sentinel of this.sentinels) {
        const c = this.client(sentinel.port, { sentinel: true })
        const addr = await c.call('SENTINEL', 'get-master-addr-by-name', NAME)
        const replicas = await c.call('SENTINEL', 'replicas', NAME)
        const others = await c.call('SENTINEL', 'sentinels', NAME)
        if (Number(addr?.[1]) !== this.seen(master.port) || replicas.length !== 1 || others.length !== 2) return false
      }
      return true
    }, 20_000, 'the sentinels did not find the master, the replica and each other')
  }

  /**
   * A data server, not started: its port chosen, with the set's password and, behind NAT, its
   * two forwarders and the settings that announce the first.
   */
  async #server() {
    const { password } = this
    const server = this.tls ? new TlsRedisServer({ certs: this.tls, authClients: this.mtls, password }) : new RedisServer({ password })
    server.port = await freePort()
    server.setArgs = [...(this.password ? ['--masterauth', this.password] : []), ...(this.tls ? ['--tls-replication', 'yes'] : [])]
    if (this.mtls) server.setArgs.push('--tls-client-cert-file', this.tls.client.certFile, '--tls-client-key-file', this.tls.client.keyFile)
    if (this.nat) {
      const announced = await new TcpProxy(server.port, '127.0.0.1', { admit: INSIDE }).start()
      const mapped = await new TcpProxy(server.port).start()
      this.forwarders.set(server.port, { announced, mapped })
      server.setArgs.push('--bind-source-addr', INSIDE, '--replica-announce-ip', '127.0.0.1', '--replica-announce-port', String(announced.port))
    }
    server.extraArgs = [...server.setArgs]
    return server
  }

  /** The port the sentinels know the data server on `port` by (its announced forwarder's). */
  seen(port) {
    return this.forwarders.get(port)?.announced.port ?? port
  }

  /** The data server's own port, from the port the sentinels announce (`seen`'s inverse). */
  real(port) {
    for (const [own, { announced }] of this.forwarders) if (announced.port === port) return own
    return port
  }

  /** Behind NAT: the forwarder `natMap` sends the data server on `port` to. */
  mappedPort(port) {
    return this.forwarders.get(port).mapped.port
  }

  /** ioredis's `natMap` for the set: each announced address to its server's open forwarder. */
  get natMap() {
    const map = {}
    for (const { announced, mapped } of this.forwarders.values()) map[`127.0.0.1:${announced.port}`] = { host: '127.0.0.1', port: mapped.port }
    return map
  }

  /**
   * A raw client (ioredis) of the server (with the set's password) or sentinel (`sentinel:
   * true`) on `port`, closed with the set.
   */
  client(port, { sentinel = this.sentinels.some((s) => s.port === port) } = {}) {
    const password = sentinel ? undefined : this.password
    const tls = this.tls && this.clientTls
    const c = new Redis({ port, host: '127.0.0.1', password, tls, lazyConnect: false, maxRetriesPerRequest: 1, enableOfflineQueue: true })
    c.on('error', () => {})
    this.clients.push(c)
    return c
  }

  /**
   * (Re)starts the set's data server `server` as the replica of `masterPort`, empty, with
   * the set's replication settings. Resolves once it listens, not once synced
   * (`replicaSeen`).
   */
  async rejoin(server, masterPort) {
    await server.stop()
    server.extraArgs = [...server.setArgs, ...REPLICATION, '--replicaof', '127.0.0.1', String(this.seen(masterPort))]
    await server.start()
  }

  /** The master's port, as `sentinel` (the first) names it now (its own, behind NAT). */
  async masterPort(sentinel = this.sentinels[0]) {
    const addr = await this.client(sentinel.port).call('SENTINEL', 'get-master-addr-by-name', NAME)
    return this.real(Number(addr[1]))
  }

  /** The data server (master or replica) listening on `port`. */
  server(port) {
    return this.servers.find((server) => server.port === port)
  }

  /** With `tls`: the Node TLS options a client of the set needs (the client certificate too with `mtls`). */
  get clientTls() {
    const { ca, client } = this.tls
    return this.mtls ? { ca, cert: client.cert, key: client.key } : { ca }
  }

  /** `{ sentinels, name }` as ioredis and our options take them. */
  get options() {
    return { sentinels: this.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })), name: NAME }
  }

  get url() {
    return `${this.tls ? 'rediss' : 'redis'}+sentinel://${this.sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${NAME}`
  }

  /**
   * Waits until every sentinel of `sentinels` (all by default; leave out one that is stopped)
   * names a master other than `oldPort` and that server says it is a master; resolves its port.
   */
  async promoted(oldPort, timeoutMs = 15_000, sentinels = this.sentinels) {
    let found
    await until(async () => {
      const ports = await Promise.all(sentinels.map(async (s) => this.real(Number((await this.client(s.port).call('SENTINEL', 'get-master-addr-by-name', NAME))[1]))))
      if (ports.some((port) => port === oldPort || port !== ports[0])) return false
      const role = await this.client(ports[0]).call('ROLE')
      found = ports[0]
      return role[0] === 'master'
    }, timeoutMs, 'no replica was promoted')
    return found
  }

  /** Waits until the replica on `port` is synced with `masterPort` and every sentinel sees it up. */
  async replicaSeen(masterPort, port, timeoutMs = 15_000) {
    let last = 'no answer'
    await until(async () => {
      const info = await this.client(port).info('replication')
      last = info.split('\r\n').filter((line) => /^(role|master_port|master_link_status|master_sync_in_progress|master_link_down_since_seconds)/.test(line)).join(' ')
      return info.includes(`master_port:${this.seen(masterPort)}`) && /master_link_status:up/.test(info)
    }, timeoutMs, () => `the replica on ${port} did not sync with ${masterPort} (last seen: ${last})`)
    let seen = 'no answer'
    await until(async () => {
      const views = []
      for (const sentinel of this.sentinels) {
        const c = this.client(sentinel.port)
        const replicas = await c.call('SENTINEL', 'replicas', NAME)
        const fields = replicas.map((r) => Object.fromEntries(r.flatMap((v, i) => (i % 2 ? [] : [[v, r[i + 1]]]))))
        const it = fields.find((r) => Number(r.port) === this.seen(port))
        // A sentinel in TILT mode (its timer ran late by 2 s or more) updates no flags for 30 s.
        const tilt = /sentinel_tilt:1/.test(await c.info('sentinel')) ? ' TILT' : ''
        views.push(`${it ? `${it.flags}/${it['master-link-status']}/info ${it['info-refresh']} ms ago` : 'not listed'}${tilt}`)
        seen = views.join(', ')
        if (!(it?.flags === 'slave' && it['master-link-status'] === 'ok')) return false
      }
      return true
    }, timeoutMs, () => `the sentinels did not see the replica on ${port} (last seen: ${seen})`)
  }

  /**
   * `SENTINEL FAILOVER`, then waits for the promotion; resolves `{ from, to }`, the old and
   * new masters' ports. `from` is read here: the sentinels may have failed over by themselves
   * since a caller last asked (a master silent for their 1 s down-after on a loaded machine).
   * Asks only `sentinels` (all by default), the first of them to fail over.
   */
  async failover(sentinels = this.sentinels) {
    const from = await this.masterPort(sentinels[0])
    await this.client(sentinels[0].port).call('SENTINEL', 'FAILOVER', NAME)
    return { from, to: await this.promoted(from, 15_000, sentinels) }
  }

  async close() {
    for (const c of this.clients) c.disconnect()
    await Promise.all([...this.sentinels, ...this.servers].map((server) => server.close()))
    await Promise.all([...this.forwarders.values()].flatMap(({ announced, mapped }) => [announced.close(), mapped.close()]))
  }
}

module.exports = { RedisSentinelSet, SentinelServer }
