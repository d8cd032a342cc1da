'use strict'

// The real binary on a Sentinel set (1 master, 1 replica, 3 sentinels, real processes):
// list, inspect and release --force find a lock DistributedLock holds through the same
// redis+sentinel:// URL, on the master; a master name no sentinel knows is exit 4, a bad
// Sentinel URL exit 3, neither printing a password. `watch` hears the wake-ups of two
// processes contending through the set, on the master's channels.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { RedisSentinelSet, SentinelServer } = require('./helpers/redis-sentinel')
const { freePort } = require('./helpers/redis-server')
const { cli } = require('./helpers/cli')
const { DistributedLock } = require('..')

let set
let master
let locks
let held

before(async () => {
  set = await RedisSentinelSet.start()
  master = set.client(await set.masterPort())
  locks = new DistributedLock(set.url)
  held = await locks.acquire('sn:cli', 60_000)
})

after(async () => {
  await held?.release().catch(() => {})
  await set?.close()
})

test('list and inspect find the lock held through redis+sentinel://, on the master', async () => {
  const listed = await cli(['list', 'lock:sn:*', '--json', '--url', set.url])
  assert.equal(listed.code, 0, listed.stderr)
  const rows = JSON.parse(listed.stdout)
  assert.deepEqual(rows.map((r) => [r.key, r.api]), [['lock:sn:cli', 'distributed-lock']])
  assert.ok(rows[0].ttlMs > 0)

  const inspected = await cli(['inspect', 'lock:sn:cli', '--json'], { env: { REDIS_URL: set.url } })
  assert.equal(inspected.code, 0, inspected.stderr)
  const lock = JSON.parse(inspected.stdout)
  assert.equal(lock.key, 'lock:sn:cli')
  assert.equal(lock.holder, `${held.token.slice(0, 8)}…`)
  assert.equal(lock.fenceCounter, await master.get(fenceKey(lock)))
})

/** The fence counter's key as inspect names it (bytes, 0xFF included, read as latin1). */
const fenceKey = (lock) => Buffer.from(lock.keys.fence, 'latin1')

test('the database after the master name is the master\'s', async () => {
  const inDb3 = await new DistributedLock(`${set.url}/3`).acquire('sn:db3', 60_000)
  try {
    const three = await cli(['list', 'lock:sn:db3', '--json', '--url', `${set.url}/3`])
    assert.equal(three.code, 0, three.stderr)
    assert.deepEqual(JSON.parse(three.stdout).map((r) => r.key), ['lock:sn:db3'])
    const zero = await cli(['list', 'lock:sn:db3', '--json', '--url', set.url])
    assert.deepEqual(JSON.parse(zero.stdout), [])
  } finally {
    await inDb3.release()
  }
})

test('release --force deletes the lock on the master and moves its fence on', async () => {
  const lock = JSON.parse((await cli(['inspect', 'lock:sn:cli', '--json', '--url', set.url])).stdout)
  const before = Number(await master.get(fenceKey(lock)))
  assert.ok(before > 0)
  const { code, stdout, stderr } = await cli(['release', 'lock:sn:cli', '--force', '--yes', '--json', '--url', set.url])
  assert.equal(code, 0, stderr)
  const result = JSON.parse(stdout)
  assert.equal(result.released, 'lock:sn:cli')
  assert.equal(await master.exists('lock:sn:cli'), 0)
  assert.ok(Number(await master.get(fenceKey(lock))) > before)
  assert.equal(result.fenceCounter, await master.get(fenceKey(lock)))
  assert.equal(await locks.isLocked('sn:cli'), false)
})

test('watch through redis+sentinel:// hears the wake-ups published on the master', async () => {
  const contenders = [0, 1].map(() => spawn(process.execPath, [path.join(__dirname, 'fixtures', 'cli-contender.js')], {
    env: { ...process.env, URL: set.url, KEY: 'sn:hot' },
    stdio: ['ignore', 'ignore', 'inherit'],
  }))
  // The contenders' own wake-ups go to each waiting connection's own channel, which watch does
  // not listen on (see cli-watch.test.js); what it counts, wake-ups announced on the lock's
  // channel (as Cluster and earlier versions send them), is sent here on the master.
  const announcing = setInterval(() => {
    master.spublish('{lock:sn:hot}:released', 'someone').catch(() => {})
  }, 20)
  try {
    const { code, stdout, stderr } = await cli(['watch', 'lock:sn:*', '--json', '--interval', '500', '--count', '5', '--url', set.url])
    assert.equal(code, 0, stderr)
    const frames = stdout.trim().split('\n').map((line) => JSON.parse(line))
    assert.equal(frames.length, 5)
    const hot = frames.map((f) => f.locks.find((l) => l.key === 'lock:sn:hot'))
    assert.ok(hot.some((l) => l && l.wakesPerSec > 0), stdout)
  } finally {
    clearInterval(announcing)
    for (const child of contenders) child.kill('SIGKILL')
  }
})

test('a master name no sentinel knows: exit 4, one line naming it', async () => {
  const url = set.url.replace(/\/mymaster$/, '/nosuchmaster')
  const { code, stderr } = await cli(['list', '--url', url, '--timeout', '2000'])
  assert.equal(code, 4, stderr)
  assert.match(stderr, /"nosuchmaster"/)
  assert.equal(stderr.trim().split('\n').length, 1)
})

test('a sentinel naming a server that is not a master: refused after ROLE, exit 4', async () => {
  const replicaPort = set.servers.find((s) => s.port !== master.options.port).port
  // A real sentinel watching the replica as if it were a master (down-after long enough that
  // it attempts no failover while the test runs).
  const stale = await new SentinelServer(replicaPort, { name: 'stale', downAfterMs: 60_000 }).start()
  try {
    const { code, stderr } = await cli(['list', '--timeout', '2000', '--url', `redis+sentinel://127.0.0.1:${stale.port}/stale`])
    assert.equal(code, 4, stderr)
    assert.match(stderr, /"stale"/)
    assert.match(stderr, new RegExp(`named 127\\.0\\.0\\.1:${replicaPort}, which is a slave`))
    assert.equal(stderr.trim().split('\n').length, 1)
  } finally {
    await stale.close()
  }
})

test('a data server given as a sentinel: its refusal of SENTINEL reported, exit 4', async () => {
  const { code, stderr } = await cli(['list', '--timeout', '2000', '--url', `redis+sentinel://127.0.0.1:${master.options.port}/mymaster`])
  assert.equal(code, 4, stderr)
  assert.match(stderr, new RegExp(`sentinel 127\\.0\\.0\\.1:${master.options.port} answered ERR`))
  assert.equal(stderr.trim().split('\n').length, 1)
})

test('no sentinel answering: exit 4 within the timeouts, naming the master, never the password', async () => {
  const [a, b] = [await freePort(), await freePort()]
  const started = Date.now()
  const { code, stderr } = await cli(['inspect', 'k', '--timeout', '1000', '--url', `redis+sentinel://u:s3cret@127.0.0.1:${a},127.0.0.1:${b}/mymaster`])
  assert.equal(code, 4, stderr)
  assert.match(stderr, /"mymaster"/)
  assert.doesNotMatch(stderr, /s3cret/)
  assert.equal(stderr.trim().split('\n').length, 1)
  assert.ok(Date.now() - started < 10_000)
})

test('a bad Sentinel URL: exit 3 with the reason, never the password', async () => {
  const hosts = set.sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')
  const cases = [
    [`redis+sentinel://${hosts}`, /must name its master/],
    [`redis+sentinel://u:s3cret@${hosts},,127.0.0.1:1/mymaster`, /empty entry/],
    [`redis+sentinel://127.0.0.1:1,127.0.0.1:1/mymaster`, /twice/],
    [`redis+sentinel://${hosts}/mymaster/x`, /database must be a number/],
    [`redis+sentinel://${hosts}/mymaster?sentinelPasswrd=s3cret`, /sentinelUsername and sentinelPassword only/],
    ['redis+sentinel://u:s3cret@127.0.0.1:99999/mymaster', /is not host:port/],
  ]
  for (const [bad, reason] of cases) {
    const { code, stderr } = await cli(['list', '--url', bad])
    assert.equal(code, 3, `${bad}: ${stderr}`)
    assert.match(stderr, reason)
    assert.doesNotMatch(stderr, /s3cret/)
    assert.equal(stderr.trim().split('\n').length, 1)
  }
})
