'use strict'

// Scenarios (ra) and (rb) only: the floor of any JavaScript Redlock client, not a lock package.
// Five bare loopback sockets (no client library), `SET key token NX PX ttl` written to all five
// and settled at the third OK, released by an EVALSHA compare-and-delete written to all five
// and settled at the third reply. No fence, no wake-up, no undo of a failed attempt, no
// timeout: what is left of a Redlock pair once everything but its ten round trips is taken
// away. Where ours and the peers stand against it says how much of a pair's time any client
// still controls (docs/plans/redlock-fast.md, "The floor").
const net = require('node:net')
const { createHash, randomBytes } = require('node:crypto')

const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
const RELEASE_SHA = createHash('sha1').update(RELEASE).digest('hex')
const QUORUM = 3

const command = (args) => {
  let text = `*${args.length}\r\n`
  for (const arg of args) {
    const value = String(arg)
    text += `$${Buffer.byteLength(value)}\r\n${value}\r\n`
  }
  return text
}

/** One socket; replies are answered in order. Every reply sent here but SCRIPT LOAD's is one line. */
async function open(port) {
  const socket = net.connect(port, '127.0.0.1')
  socket.setNoDelay(true)
  await new Promise((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  const waiting = []
  let rest = '' // a line cut by a chunk's end
  let skip = 0 // 1 while a bulk reply's line is to come
  socket.on('data', (chunk) => {
    const lines = (rest + chunk.toString('latin1')).split('\r\n')
    rest = lines.pop()
    for (const line of lines) {
      if (line[0] === '$' && line !== '$-1' && skip === 0) {
        skip = 1 // SCRIPT LOAD's sha follows on its own line
      } else if (skip > 0) {
        skip = 0
        waiting.shift()(true)
      } else {
        waiting.shift()(line === '+OK' || line === ':1')
      }
    }
  })
  socket.on('error', () => {})
  const send = (text) =>
    new Promise((resolve) => {
      waiting.push(resolve)
      socket.write(text)
    })
  return { send, close: () => socket.destroy() }
}

module.exports = {
  name: 'bare sockets (5): SET NX PX + compare-and-delete, at the 3rd reply',
  kind: 'baseline',
  package: 'node:net',
  scenarios: ['ra', 'rb'],
  async create({ ports }) {
    const sockets = await Promise.all(ports.map(open))
    await Promise.all(sockets.map((s) => s.send(command(['SCRIPT', 'LOAD', RELEASE]))))
    /** Resolves true at the third yes, false once a quorum can no longer say yes. */
    const quorum = (text) =>
      new Promise((resolve) => {
        let yes = 0
        let no = 0
        for (const socket of sockets) {
          socket.send(text).then((ok) => {
            if (ok) {
              if (++yes === QUORUM) resolve(true)
            } else if (++no === sockets.length - QUORUM + 1) {
              resolve(false)
            }
          })
        }
      })
    return {
      async acquire(key, ttlMs) {
        const token = randomBytes(16).toString('hex')
        return (await quorum(command(['SET', key, token, 'NX', 'PX', ttlMs]))) ? { key, token } : null
      },
      release: ({ key, token }) => quorum(command(['EVALSHA', RELEASE_SHA, 1, key, token])),
      close: async () => sockets.forEach((s) => s.close()),
    }
  },
}
