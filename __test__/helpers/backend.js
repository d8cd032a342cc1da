'use strict'

// One switch for the tests that hold on every backend: with NRL_BACKEND=memory they run on
// the embedded memory:// backend, with NRL_BACKEND=redis-resp2 on a private redis-server
// without HELLO (so without RESP3: no wake-up messages, waiters poll), otherwise on a private
// redis-server (`npm test` runs them all three ways). Tests that need a Redis server itself (MONITOR, CLIENT, a killed or paused
// server, another process) are declared with `redisOnly`, which leaves them out of the
// memory:// run.
const { test } = require('node:test')
const Redis = require('ioredis')
const { startRedis } = require('./redis-server')

const BACKEND = process.env.NRL_BACKEND ?? 'redis'
if (!['redis', 'redis-resp2', 'memory'].includes(BACKEND)) {
  throw new Error(`NRL_BACKEND must be redis, redis-resp2 or memory, got ${JSON.stringify(BACKEND)}`)
}
const onRedis = BACKEND !== 'memory'
/** The server's arguments for this run: HELLO renamed away for redis-resp2. */
const serverArgs = BACKEND === 'redis-resp2' ? ['--rename-command', 'HELLO', ''] : []

let made = 0

/**
 * A backend for one test file: `url` for our APIs, `alias` another URL of the same store (a
 * second connection on Redis), `client()` an ioredis client or, on memory://, an object
 * answering the same calls on the same keyspace, and `close()`.
 */
async function startBackend(options) {
  if (onRedis) {
    const server = await startRedis({ ...options, args: [...(options?.args ?? []), ...serverArgs] })
    return {
      name: BACKEND,
      server,
      url: server.url,
      alias: `redis://localhost:${server.port}`,
      client: () => new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 }),
      close: () => server.close(),
    }
  }
  const url = `memory://tests-${process.pid}-${++made}`
  return { name: BACKEND, server: null, url, alias: url, client: () => memoryClient(url), close: async () => {} }
}

/** The ioredis calls tests make, run on a memory:// keyspace (`memoryCommand`). */
function memoryClient(url) {
  const native = require('../../lib/native')
  // As ioredis answers: bulk strings as strings (Buffers for the `...Buffer` calls).
  const decode = (reply, buffers) => {
    if (reply === null || typeof reply === 'number') return reply
    if (Array.isArray(reply)) return reply.map((item) => decode(item, buffers))
    if ('bulk' in reply) {
      const bytes = Buffer.from(reply.bulk, 'base64')
      return buffers ? bytes : bytes.toString()
    }
    if ('status' in reply) return reply.status
    throw new Error(reply.error)
  }
  const run = (args, buffers = false) => {
    const bytes = args.map((arg) => (Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg))))
    try {
      return Promise.resolve(decode(JSON.parse(native.memoryCommand(url, bytes)), buffers))
    } catch (err) {
      return Promise.reject(err)
    }
  }
  // ioredis's transaction: queued calls, answered as `[[error, reply], ...]` by `exec()`.
  const multi = () => {
    const queued = []
    const chain = new Proxy(
      {
        exec: async () => {
          const out = []
          for (const args of queued) out.push(await run(args).then((reply) => [null, reply], (err) => [err, null]))
          return out
        },
        call: (command, ...args) => {
          queued.push([command, ...args])
          return chain
        },
      },
      {
        get(target, name) {
          if (name in target) return target[name]
          if (typeof name !== 'string' || name === 'then') return undefined
          return (...args) => {
            queued.push([name.toUpperCase(), ...args])
            return chain
          }
        },
      },
    )
    return chain
  }
  const own = {
    multi,
    call: (command, ...args) => run([command, ...args]),
    connect: async () => {},
    disconnect: () => {},
    on: () => own,
    quit: async () => 'OK',
  }
  return new Proxy(own, {
    get(target, name) {
      if (name in target) return target[name]
      if (typeof name !== 'string' || name === 'then') return undefined
      const buffers = name.endsWith('Buffer')
      const command = (buffers ? name.slice(0, -'Buffer'.length) : name).toUpperCase()
      return (...args) => run([command, ...args], buffers)
    },
  })
}

/** A test that needs a Redis server itself: left out of the memory:// run. */
function redisOnly(name, ...rest) {
  if (onRedis) return test(name, ...rest)
}

module.exports = { BACKEND, onRedis, startBackend, redisOnly }
