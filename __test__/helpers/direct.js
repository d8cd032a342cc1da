'use strict'

// Our JS-thread connection (src/binding/js/socket), seen from Redis: it speaks RESP2 (the tokio
// one RESP3), and the test's own admin client is named `test-admin` to tell it apart.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Ids of our JS-thread connections. */
async function directConnections(admin) {
  const lines = (await admin.client('LIST')).split('\n')
  return lines.filter((l) => / resp=2/.test(l) && !l.includes('name=test-admin')).map((l) => /id=(\d+)/.exec(l)[1])
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

module.exports = { directConnections, withDirect }
