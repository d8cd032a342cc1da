'use strict'

// Plain handles (no autoRefresh) and a Redis restarted empty while the calls go over the JS
// thread's socket: does the restart put them in doubt, over RESP3 and over RESP2 (no push
// tells of a drop)? The broken socket sends the next call to the runtime's connection, which
// finds its own connection gone and records the drop the handles read: in doubt, not held.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../helpers/redis-server')
const { DistributedLock } = require('../..')

for (const [name, args] of [
  ['RESP3', []],
  ['RESP2 (a server without HELLO)', ['--rename-command', 'HELLO', '']],
]) {
  test(`${name}: a restart with traffic on the JS thread's socket puts plain handles in doubt`, async () => {
    const server = await startRedis({ args })
    try {
      const lock = new DistributedLock(server.url)
      // The first call opens the runtime's connection; the next go over the JS thread's socket.
      for (let i = 0; i < 3; i++) assert.ok(await lock.tryAcquire(`plain-doubt:warm${i}`, 1000))
      const handle = await lock.tryAcquire('plain-doubt:a', 10_000)
      assert.deepEqual([handle.isHeld, handle.suspended], [true, false])
      await server.kill()
      await server.start()
      // One call after the restart, whichever way it goes.
      assert.ok(await lock.tryAcquire('plain-doubt:b', 1000))
      assert.deepEqual([handle.isHeld, handle.suspended], [false, true], 'in doubt after the restart')
      // Redis came back empty: the handle's extend finds the lock gone.
      await assert.rejects(handle.extend(1000), { code: 'ENOTHELD' })
      assert.deepEqual([handle.isHeld, handle.suspended], [false, false])
    } finally {
      await server.close()
    }
  })
}
