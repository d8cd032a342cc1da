'use strict'

// One master of a Redis Cluster (3 masters, a replica each) SIGKILLed, by pid: locks on the
// other masters keep working; calls on the dead master's keys fail cleanly (a connection
// error or timeout, never "held") within their bound; its holders are told at once that their
// locks are in doubt (onSuspended, ExclusiveLock's `suspended`); the holders' keys never
// reached the replica (what asynchronous replication does when a master dies before sending
// a write), so once it took over a refresh finds them gone and tells the holders (onLost,
// ExclusiveLock's `error`) long before their TTL; its keys are then locked again, with
// fences above the ones the replica had.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { RedisCluster } = require('../helpers/redis-cluster')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('../..')
const syncguard = require('../../syncguard')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let cluster

before(async () => {
  // DEBUG RELOAD (below) takes the debug command, on loopback only.
  cluster = await RedisCluster.start({ masters: 3, replicas: 1, args: ['--enable-debug-command', 'local'] })
})

after(async () => {
  await cluster?.close()
})

/** `promise`'s settlement, or a failure naming `what` after `ms`: nothing may hang. */
async function within(ms, what, promise) {
  let timer
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** Until `replica` has everything the master at `port` wrote so far. */
async function caughtUp(port, replica) {
  const offset = (info, field) => Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? -1)
  const target = offset(await cluster.command(port, 'INFO', 'replication'), 'master_repl_offset')
  await within(5000, 'the replica catching up', (async () => {
    while (offset(await cluster.command(replica.port, 'INFO', 'replication'), 'slave_repl_offset') < target) await sleep(10)
  })())
}

test('a master killed: the others go on, its keys fail cleanly, its holders are told, its replica takes over', async () => {
  const [dead, ...alive] = await cluster.masterPorts()
  const replica = await cluster.replicaOf(dead)
  assert.ok(replica, `no replica of ${dead}`)
  const locks = new DistributedLock(cluster.url, { connectTimeoutMs: 500, commandTimeoutMs: 1000 })
  const deadKey = await cluster.keyOn(dead, 'failover:', 'lock:')
  const before = await locks.acquire(deadKey, 5000)
  await before.release()
  // The replica has everything so far, saved: the fence counter `before` drew included.
  await caughtUp(dead, replica)
  await cluster.command(replica.port, 'SAVE')

  // Holders on the master about to die, with a TTL well past the promotion (about 2-3 s): they
  // are told by a refresh on the promoted replica, not by their deadline. And one on a master
  // that stays.
  const TTL = 10_000
  const told = []
  const suspended = []
  const doomed = await locks.acquire(deadKey, TTL, {
    autoRefresh: true,
    onLost: (err) => told.push(['distributed', err, Date.now()]),
    onSuspended: () => suspended.push(['distributed', Date.now()]),
  })
  const acquiredAt = Date.now()
  const exclusiveName = await cluster.keyOn(dead, 'failover-', 'ex:')
  const exclusive = new ExclusiveLock({ name: exclusiveName, key_prefix: 'ex', cache_connection: cluster.url, lock_ttl_ms: TTL, lock_refresh_ms: 1000 })
  exclusive.on('error', (err) => told.push(['exclusive', err, Date.now()]))
  exclusive.on('suspended', () => suspended.push(['exclusive', Date.now()]))
  assert.equal(await exclusive.acquire(), true)
  const serviceKey = await cluster.keyOn(dead, 'failover-service:')
  // Keys of the dead master that ExclusiveLock and maestro try for while it is down.
  const otherExName = await cluster.keyOn(dead, 'failover-other-', 'ex:')
  const otherServiceKey = await cluster.keyOn(dead, 'failover-service-other:')
  const quiet = { error() {}, warn() {}, info() {}, debug() {} }
  const service = new DistributedLockService(serviceKey, TTL, cluster.url, {
    logger: quiet,
    onSuspended: () => suspended.push(['maestro', Date.now()]),
    onLost: (_service, err) => told.push(['maestro', err, Date.now()]),
  })
  assert.equal(await service.acquire(TTL, 200), true)
  // syncguard keeps no hold to tell: its lookup and owns must never say ours once the master died.
  const backend = syncguard.createRedisBackend(cluster.url, { commandTimeoutMs: 1000 })
  const sgKey = await cluster.keyOn(dead, 'failover-sg:', 'syncguard:')
  const sgHeld = await backend.acquire({ key: sgKey, ttlMs: TTL })
  assert.equal(sgHeld.ok, true, JSON.stringify(sgHeld))
  assert.equal(await syncguard.owns(backend, sgHeld.lockId), true)
  // Its TTL as long as theirs: from the moment the dead master is marked failed until its
  // replica is promoted, every master answers CLUSTERDOWN (cluster-require-full-coverage yes,
  // Redis's default), so an 800 ms lock on a live master is lost by its deadline (about 2.1 s
  // after the kill). With the option off on the live masters it is kept through the failover;
  // cluster_paused_master.rs tests that a stalled master holds no live one's refreshes back.
  const survivorKey = await cluster.keyOn(alive[0], 'failover-stays:', 'lock:')
  let survivorLost
  const survivor = await locks.acquire(survivorKey, TTL, { autoRefresh: true, onLost: (err) => { survivorLost = err } })

  // The holders' keys taken back off the replica, as sentinel-failover.test.js deletes them
  // there: a cluster replica turns a DEL away (MOVED), so it loads the dataset it saved
  // before they were written. Later refreshes replicate as PEXPIREs of keys it lacks.
  await caughtUp(dead, replica)
  await cluster.command(replica.port, 'DEBUG', 'RELOAD', 'NOSAVE')
  const onReplica = await cluster.command(replica.port, 'KEYS', '*failover*')
  assert.ok(!onReplica.includes(`lock:${deadKey}`), `the holder's key is still on the replica: ${onReplica}`)
  assert.equal(await cluster.command(dead, 'GET', `lock:${deadKey}`), doomed.token, 'still held on the master')
  assert.ok(!onReplica.includes(serviceKey), `the service's key is still on the replica: ${onReplica}`)
  assert.ok(!onReplica.includes(`syncguard:${sgKey}`), `syncguard's key is still on the replica: ${onReplica}`)

  const killedAt = Date.now()
  await cluster.node(dead).kill()

  // The other masters: every call answers, as before.
  for (const port of alive) {
    const key = await cluster.keyOn(port, 'failover-other:', 'lock:')
    const handle = await within(3000, `acquire on ${port}`, locks.acquire(key, 2000))
    assert.equal(await within(3000, `isLocked on ${port}`, locks.isLocked(key)), true)
    await within(3000, `release on ${port}`, handle.release())
  }

  // The dead master's keys: a clean error, never ELOCKED, never a hang.
  const err = await within(5000, 'acquire on the dead master', locks.acquire(deadKey, 2000).then(
    (handle) => assert.fail(`acquired ${handle.key} on a dead master`),
    (e) => e,
  ))
  assert.ok(['ECONNECTION', 'ETIMEDOUT'].includes(err.code), `${err.code}: ${err.message}`)
  // syncguard on the dead master's key: a clean error while no master answers, or, once the
  // replica took over, the truth (gone): never the dead master's record, never a hang.
  // Asked now, side by side with the checks below, and judged once they are done.
  const sgCalls = [
    ['lookup', () => backend.lookup({ key: sgKey })],
    ['owns', () => syncguard.owns(backend, sgHeld.lockId)],
    ['acquire', () => backend.acquire({ key: `${sgKey}`, ttlMs: 2000 })],
  ]
  const sgAnswers = sgCalls.map(([what, call]) => within(5000, `syncguard ${what} on the dead master`, call().then((v) => ({ v }), (e) => ({ e }))))
  for (const a of sgAnswers) a.catch(() => {})
  // ExclusiveLock and maestro acquiring other keys of the dead master: settled within their
  // bound; ExclusiveLock's a connection error or timeout, never false ("held"); either may win
  // once the replica took over. maestro answers false for any failure, by its contract.
  const otherEx = new ExclusiveLock({ name: otherExName, key_prefix: 'ex', cache_connection: cluster.url, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
  otherEx.on('error', () => {})
  const otherService = new DistributedLockService(otherServiceKey, 5000, cluster.url, { logger: quiet })
  const exDuring = within(12_000, 'ExclusiveLock.acquire() on the dead master', otherEx.acquire().then((v) => ({ v }), (e) => ({ e })))
  const serviceDuring = within(12_000, "maestro's acquire on the dead master", otherService.acquire(5000, 1000))
  exDuring.catch(() => {})
  serviceDuring.catch(() => {})

  // In doubt as soon as a refresh met the dead node: told, long before anything is known.
  const doubtBy = killedAt + 5000
  while (suspended.length < 3 && Date.now() < doubtBy) await sleep(20)
  assert.deepEqual(suspended.map(([who]) => who).sort(), ['distributed', 'exclusive', 'maestro'], `suspended: ${suspended.map(([w]) => w)}`)
  assert.equal(doomed.suspended, true)

  // The replica takes over (cluster-node-timeout 1 s, then the election); a refresh there
  // finds the keys gone and tells their holders, before their TTL would have.
  const toldBy = acquiredAt + TTL
  while (told.length < 3 && Date.now() < toldBy) await sleep(20)
  assert.deepEqual(told.map(([who]) => who).sort(), ['distributed', 'exclusive', 'maestro'], `told: ${told.map(([w, e]) => `${w} ${e.code}`)}`)
  for (const [who, e, at] of told) {
    assert.equal(e.code, 'ELOST', `${who}: ${e.code} ${e.message}`)
    assert.ok(at < acquiredAt + TTL - 1000, `${who} told ${at - acquiredAt} ms after acquiring, near its TTL's end: by its deadline, not a refresh`)
    assert.match(e.message, /gone|taken|no longer|not held|another/i, `${who}: told for another reason: ${e.message}`)
  }
  assert.equal(doomed.isHeld, false)
  assert.equal(service.isLocked, false)
  assert.equal(survivorLost, undefined, 'a holder on a live master was told it lost its lock')
  assert.equal(survivor.isHeld, true)

  for (const [i, [what]] of sgCalls.entries()) {
    const answer = await sgAnswers[i]
    // CLUSTERDOWN (every master answers it between the failure and the promotion) is the
    // key's server out of reach: ServiceUnavailable, as a refused connection.
    if (answer.e) {
      const clean = ['ServiceUnavailable', 'NetworkTimeout'].includes(answer.e.code)
      assert.ok(clean, `${what}: ${answer.e.code}: ${answer.e.message}`)
    } else if (what === 'acquire') {
      // Only once the replica answered, where the old record never was.
      assert.equal(answer.v.ok, true, `acquire on the dead master's key: ${JSON.stringify(answer.v)}`)
      await backend.release({ lockId: answer.v.lockId })
    } else assert.ok(answer.v === null || answer.v === false, `${what} said the dead master's lock is held: ${JSON.stringify(answer.v)}`)
  }

  const ex = await exDuring
  if (ex.e) assert.ok(['ECONNECTION', 'ETIMEDOUT'].includes(ex.e.code), `ExclusiveLock: ${ex.e.code}: ${ex.e.message}`)
  else {
    assert.equal(ex.v, true, 'ExclusiveLock.acquire() answered false ("held") on a dead master')
    await otherEx.release()
  }
  if (await serviceDuring) await otherService.release()

  // The keys work again once the promoted replica answers.
  let again
  const until = Date.now() + 20_000
  while (!again) {
    try {
      again = await locks.acquire(deadKey, 2000)
    } catch (e) {
      // Refused, timed out, or the cluster still electing: never "held by someone".
      assert.notEqual(e.code, 'ELOCKED', e.message)
      assert.ok(Date.now() < until, `the dead master's keys never came back: ${e.message}`)
      await sleep(200)
    }
  }
  // Above what the replica had; the doomed holder's own draw was lost with its keys (README,
  // Scaling out: a failover may lose what the master had not replicated, fence counters too).
  assert.ok(BigInt(again.fence) > BigInt(before.fence), `fence ${again.fence} after ${before.fence}`)
  // The lock is on the promoted replica (the nodes' views of it converge within moments).
  assert.equal(await cluster.command(replica.port, 'GET', `lock:${deadKey}`), again.token)
  await again.release()
  // The other APIs lock the dead master's keys again too, on the promoted replica (each
  // asked again while the nodes' views of the promotion converge: false or an error then,
  // within 20 s).
  const soon = async (what, take) => {
    const until = Date.now() + 20_000
    for (;;) {
      const answer = await within(5000, what, take().catch((e) => e))
      if (answer === true || answer?.ok === true) return answer
      assert.ok(Date.now() < until, `${what}: the dead master's key never came back: ${answer?.message ?? JSON.stringify(answer)}`)
      await sleep(200)
    }
  }
  const exclusiveAgain = new ExclusiveLock({ name: exclusiveName, key_prefix: 'ex', cache_connection: cluster.url, lock_ttl_ms: 5000, lock_refresh_ms: 1000 })
  exclusiveAgain.on('error', () => {})
  await soon('ExclusiveLock again', () => exclusiveAgain.acquire())
  assert.equal(await cluster.command(replica.port, 'EXISTS', `ex:${exclusiveName}`), 1)
  await exclusiveAgain.release()
  const serviceAgain = new DistributedLockService(serviceKey, 5000, cluster.url, { logger: quiet })
  await soon('maestro again', () => serviceAgain.acquire(5000, 1000))
  assert.equal(await cluster.command(replica.port, 'EXISTS', serviceKey), 1)
  await serviceAgain.release()
  assert.equal(await syncguard.owns(backend, sgHeld.lockId), false, 'the lost syncguard lock is not ours')
  assert.equal(await backend.lookup({ key: sgKey }), null)
  const sgAgain = await soon('syncguard again', () => backend.acquire({ key: sgKey, ttlMs: 5000 }))
  assert.equal(await cluster.command(replica.port, 'EXISTS', `syncguard:${sgKey}`), 1)
  assert.equal((await backend.release({ lockId: sgAgain.lockId })).ok, true)
  await survivor.release()
})
