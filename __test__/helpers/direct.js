'use strict'

// Our JS-thread connection (src/binding/js/socket), seen from Redis: it speaks RESP2 (the tokio
// one RESP3), and the test's own admin client is named `test-admin` to tell it apart.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Ids of our JS-thread connections. */
async function directConnections(admin) {
  return (await ourConnections(admin)).socket
}

/** Our connections to the server: the JS thread's speaks RESP2, the runtime's RESP3. */
async function ourConnections(admin) {
  const lines = (await admin.client('LIST')).split('\n').filter((l) => l.includes('id=') && !l.includes('name=test-admin'))
  const ids = (resp) => lines.filter((l) => l.includes(` resp=${resp}`)).map((l) => /id=(\d+)/.exec(l)[1])
  return { socket: ids(2), tokio: ids(3) }
}

/** The test's own client of `server`, named `test-admin` so that it is not counted as ours. */
async function adminOf(server) {
  const Redis = require('ioredis')
  const admin = new Redis(server.port, { lazyConnect: true })
  await admin.connect()
  await admin.client('SETNAME', 'test-admin')
  return admin
}

/** Makes calls until the JS-thread connection is open (it opens after the first call). */
async function withDirect(lock, admin) {
  for (let tries = 0; tries < 100; tries++) {
    await lock.isLocked('warm-up')
    if ((await directConnections(admin)).length > 0) return
    await sleep(10)
  }
  throw new Error('the JS-thread connection never opened')
}

module.exports = { directConnections, ourConnections, adminOf, withDirect }
