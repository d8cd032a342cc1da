'use strict'

// What the Redlock fault tests with one node behind a proxy share (faults/redlock-owed*.test.js,
// faults/redlock-silence.test.js): 5 private redis-servers, node 4 behind a proxy (to delay,
// partition or reset its connections), and a raw client of each node to read what it holds.
const Redis = require('ioredis')
const { startRedis } = require('./redis-server')
const { startProxy } = require('./tcp-proxy')
const { directConnections } = require('./direct')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The nodes: `servers`, `proxy` (node 4's), `admins` (one per node), `urls` (node 4's through
 * the proxy); `close()` stops them all. */
async function startProxiedNodes() {
  const servers = await Promise.all(Array.from({ length: 5 }, () => startRedis()))
  const proxy = await startProxy(servers[4].port)
  const admin = (server) => new Redis(server.url, { connectionName: 'test-admin', maxRetriesPerRequest: 1 }).on('error', () => {})
  const admins = servers.map(admin)
  const urls = [...servers.slice(0, 4).map((server) => server.url), proxy.url]
  const close = async () => {
    for (const client of admins) client.disconnect()
    await proxy.close()
    await Promise.all(servers.map((server) => server.close()))
  }
  return { servers, proxy, admins, urls, close }
}

/** Polls `read` until it answers `expected` (deep-equal) or `ms` pass; answers the last read. */
async function until(read, expected, ms = 3_000) {
  let value
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(20)) {
    value = await read()
    if (JSON.stringify(value) === JSON.stringify(expected)) return value
  }
  return value
}

/** Acquires and releases with `lock` until every node has a JS-thread socket of ours open;
 * answers each node's socket ids. */
async function openSockets(lock, admins) {
  for (let tries = 0; ; tries++) {
    await (await lock.acquire('warm', 5_000)).release()
    const open = await Promise.all(admins.map(directConnections))
    if (open.every((ids) => ids.length > 0)) return open
    if (tries >= 300) throw new Error('the nodes’ JS-thread connections never opened')
    await sleep(10)
  }
}

module.exports = { startProxiedNodes, openSockets, until, sleep }
