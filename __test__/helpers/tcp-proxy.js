'use strict'

// A loopback TCP proxy between the client and Redis, for fault tests.
// - partition(): stops moving bytes both ways and leaves new connections hanging, as a
//   network that drops packets does (TCP retransmits, so nothing is lost: it arrives late);
// - heal(): moves everything that waited, in order;
// - setDelay(ms): delays every chunk by `ms` in each direction (order kept);
// - reset(): resets every open connection, as a middlebox or a flapping link does;
// - refuse(ms): resets every connection and refuses new ones for `ms`, then accepts again on
//   the same port, as a Redis restarted by a supervisor does (resolves with the time it
//   really refused, which load can stretch);
// - stopAccepting(): refuses new connections for good, the open ones kept moving;
// - accepted: how many connections it has accepted, to prove a client went through it;
// - `{ admit }`: only connections from that source address go through; any other is reset at
//   once and counted in `turnedAway` (a forwarder only some processes can use).
const net = require('node:net')

class TcpProxy {
  #server
  #pairs = new Set()
  #partitioned = false
  #delayMs = 0

  constructor(targetPort, targetHost = '127.0.0.1', { admit } = {}) {
    this.targetPort = targetPort
    this.targetHost = targetHost
    this.admit = admit
    this.port = undefined
    this.accepted = 0
    this.turnedAway = 0
  }

  async start() {
    this.#server = net.createServer((client) => this.#accept(client))
    await new Promise((resolve) => this.#server.listen(0, '127.0.0.1', resolve))
    this.port = this.#server.address().port
    return this
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`
  }

  #accept(client) {
    if (this.admit !== undefined && client.remoteAddress !== this.admit) {
      this.turnedAway++
      client.resetAndDestroy()
      return
    }
    this.accepted++
    const pair = { client, upstream: null, queues: [], paused: false }
    this.#pairs.add(pair)
    const upstream = net.connect(this.targetPort, this.targetHost)
    pair.upstream = upstream
    const close = () => {
      this.#pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', close).on('close', close)
    upstream.on('error', close).on('close', close)
    this.#pipe(client, upstream)
    this.#pipe(upstream, client)
    if (this.#partitioned) {
      client.pause()
      upstream.pause()
    }
  }

  #pipe(from, to) {
    // One chain per direction keeps the order; each chunk leaves `delay` ms after it
    // arrived (latency, not a throughput limit: chunks in flight overlap).
    let chain = Promise.resolve()
    from.on('data', (chunk) => {
      const due = performance.now() + this.#delayMs
      chain = chain.then(() => {
        const wait = due - performance.now()
        if (wait <= 0) return to.write(chunk)
        return new Promise((resolve) => setTimeout(() => resolve(to.write(chunk)), wait))
      })
    })
  }

  partition() {
    this.#partitioned = true
    for (const { client, upstream } of this.#pairs) {
      client.pause()
      upstream.pause()
    }
  }

  heal() {
    this.#partitioned = false
    for (const { client, upstream } of this.#pairs) {
      client.resume()
      upstream.resume()
    }
  }

  setDelay(ms) {
    this.#delayMs = ms
  }

  /** Resets every connection (RST both ways); new connections go through as before. */
  reset() {
    for (const { client, upstream } of this.#pairs) {
      client.resetAndDestroy()
      upstream.resetAndDestroy()
    }
  }

  /**
   * Resets every connection and closes the port for `ms`; resolves once it accepts again, with
   * how long the port was closed in fact (ms): under load the timer and the listen run late.
   */
  async refuse(ms) {
    const closedAt = performance.now()
    const closed = new Promise((resolve) => this.#server.close(resolve))
    this.reset()
    await closed
    await new Promise((resolve) => setTimeout(resolve, ms))
    this.#server = net.createServer((client) => this.#accept(client))
    await new Promise((resolve) => this.#server.listen(this.port, '127.0.0.1', resolve))
    return performance.now() - closedAt
  }

  /**
   * Closes the port at once (new connections refused); the connections already open go on.
   * Not awaited: the server's own 'close' comes only once they end, in close().
   */
  stopAccepting() {
    this.#server.close()
  }

  async close() {
    for (const { client, upstream } of this.#pairs) {
      client.destroy()
      upstream.destroy()
    }
    await new Promise((resolve) => this.#server.close(resolve))
  }
}

async function startProxy(targetPort) {
  return new TcpProxy(targetPort).start()
}

module.exports = { startProxy, TcpProxy }
