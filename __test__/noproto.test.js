'use strict'

// A server that has HELLO but not protocol 3 answers `HELLO 3` with -NOPROTO: the same
// refusal as a server without HELLO (-ERR unknown command), so we speak RESP2 to it. A real
// redis-server answers NOPROTO to a protocol it does not know, so a proxy that asks for
// protocol 4 where the client asked for 3 makes one.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const Redis = require('ioredis')
const { DistributedLock } = require('..')
const { startRedis } = require('./helpers/redis-server')

let server
let proxy
let admin
const HELLO_3 = Buffer.from('$5\r\nHELLO\r\n$1\r\n3\r\n')
const HELLO_4 = Buffer.from('$5\r\nHELLO\r\n$1\r\n4\r\n')
let rewritten = 0

/** Bytes from the client with every `HELLO 3` turned into `HELLO 4`. */
function noProtocol3(chunk) {
  let at = chunk.indexOf(HELLO_3)
  while (at !== -1) {
    HELLO_4.copy(chunk, at)
    rewritten++
    at = chunk.indexOf(HELLO_3, at + HELLO_3.length)
  }
  return chunk
}

before(async () => {
  server = await startRedis()
  admin = new Redis(server.port, { lazyConnect: true })
  await admin.connect()
  proxy = net.createServer((client) => {
    const upstream = net.connect(server.port, '127.0.0.1')
    const close = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('error', close).on('close', close)
    upstream.on('error', close).on('close', close)
    client.on('data', (chunk) => upstream.write(noProtocol3(chunk)))
    upstream.pipe(client)
  })
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve))
})

after(async () => {
  admin.disconnect()
  await new Promise((resolve) => proxy.close(resolve))
  await server.close()
})

test('a server answering HELLO 3 with NOPROTO is spoken to over RESP2: locks, waits and releases work', async () => {
  // As the server itself answers.
  await assert.rejects(admin.call('HELLO', '4'), /NOPROTO/)
  const url = `redis://127.0.0.1:${proxy.address().port}`
  const lock = new DistributedLock(url, { retryDelayMs: 50 })
  const other = new DistributedLock(url, { retryDelayMs: 50 })
  const held = await lock.acquire('noproto:a', 10_000)
  assert.equal(await admin.get('lock:noproto:a'), held.token)
  assert.equal(await lock.isLocked('noproto:a'), true)
  // No pushes over RESP2: the waiter polls, and wins once the lock is released.
  const waiting = other.waitForLock('noproto:a', 10_000, 5000)
  await new Promise((resolve) => setTimeout(resolve, 100))
  await held.release()
  const next = await waiting
  assert.equal(await admin.get('lock:noproto:a'), next.token)
  assert.ok(BigInt(next.fence) > BigInt(held.fence))
  await next.release()
  assert.equal(await admin.exists('lock:noproto:a'), 0)
  assert.ok(rewritten > 0, 'the client never asked for RESP3')
  // Every connection of ours speaks RESP2 now, none subscribes.
  const ours = (await admin.client('LIST')).split('\n').filter((line) => line && !line.includes('cmd=client|list'))
  assert.ok(ours.length > 0)
  for (const line of ours) assert.match(line, / resp=2/)
  assert.deepEqual(await admin.call('PUBSUB', 'SHARDCHANNELS'), [])
})

test('the first calls on a new connection to a server without RESP3, all at once, all go over RESP2', async () => {
  const plain = await startRedis({ args: ['--rename-command', 'HELLO', ''] })
  try {
    // Refused with NOPROTO (through the proxy, named anew so that a new connection opens) and
    // with unknown command (HELLO renamed away).
    for (const url of [`redis://localhost:${proxy.address().port}`, plain.url]) {
      const lock = new DistributedLock(url)
      const handles = await Promise.all(Array.from({ length: 200 }, (_, i) => lock.acquire(`noproto:many:${i}`, 10_000)))
      assert.equal(handles.length, 200)
      await Promise.all(handles.map((handle) => handle.release()))
    }
  } finally {
    await plain.close()
  }
})
