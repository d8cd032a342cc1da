'use strict'

// ioredis clients for the peers and the bench itself, and Redis command counters.
const Redis = require('ioredis')

/** An ioredis client with default options (what a user of the peer gets), connected. */
async function connect(port, options = {}) {
  const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 3, lazyConnect: true, ...options })
  await client.connect()
  return client
}

/** Sum of `calls` over INFO commandstats, without the INFO / CONFIG calls the bench makes itself. */
async function commandCalls(client) {
  const text = await client.info('commandstats')
  let total = 0
  const perCommand = {}
  for (const line of text.split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
    if (!m || m[1] === 'info' || m[1].startsWith('config')) continue
    total += Number(m[2])
    perCommand[m[1]] = Number(m[2])
  }
  return { total, perCommand }
}

function diffCalls(after, before) {
  const perCommand = {}
  for (const [name, calls] of Object.entries(after.perCommand)) {
    const d = calls - (before.perCommand[name] ?? 0)
    if (d) perCommand[name] = d
  }
  return { total: after.total - before.total, perCommand }
}

module.exports = { connect, commandCalls, diffCalls }
