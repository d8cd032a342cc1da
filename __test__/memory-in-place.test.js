'use strict'

// On memory:// a DistributedLock call that succeeds is answered inside the JS call that
// made it (src/binding/js/in_call.rs): the tests here hold what that must not change. A
// chain of awaits on such calls still lets the event loop turn, answers come in the order
// the calls were made, and each resolves only with the lock recorded in the keyspace.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { DistributedLock } = require('..')

const lockOn = (name, options) => new DistributedLock(`memory://in-place-${name}-${process.pid}`, { keyPrefix: 'lock:', ...options })

test('a long chain of awaited memory:// pairs lets timers and immediates run', async () => {
  const lock = lockOn('chain')
  let immediateAt = -1
  let timerAt = -1
  let pairs = 0
  setImmediate(() => (immediateAt = pairs))
  setTimeout(() => (timerAt = pairs), 0)
  const started = performance.now()
  while (pairs < 20_000 && (timerAt < 0 || immediateAt < 0)) {
    const handle = await lock.acquire('k', 10_000)
    await handle.release()
    pairs++
    // Bounded by time too, so a machine too slow for the timer's 1 ms still ends.
    if (performance.now() - started > 30_000) break
  }
  assert.ok(immediateAt >= 0 && immediateAt < 20_000, `the immediate ran after ${immediateAt} of ${pairs} pairs`)
  assert.ok(timerAt >= 0 && timerAt < 20_000, `the timer ran after ${timerAt} of ${pairs} pairs`)
})

test('memory:// pairs are still answered in place after the loop turned: it turns once per 1,024 calls, not per call', async () => {
  const lock = lockOn('turns')
  // A first pair opens the lock's keyspace (the loop turns meanwhile, as for any I/O).
  await (await lock.acquire('k', 10_000)).release()
  // Pairs between two turns of the loop, read by an immediate set again each time it runs.
  let pairs = 0
  let since = 0
  const runs = []
  let watching = true
  const watch = () => {
    runs.push(pairs - since)
    since = pairs
    if (watching) setImmediate(watch)
  }
  setImmediate(watch)
  while (pairs < 6_000) {
    const handle = await lock.acquire('k', 10_000)
    await handle.release()
    pairs++
  }
  watching = false
  // The first run aside (counted from wherever the count of calls stood), each turn comes
  // after some 512 pairs; answered at the next turn instead, each call would make one.
  const later = runs.slice(1)
  assert.ok(later.length >= 5, `the loop turned ${runs.length} times in ${pairs} pairs`)
  assert.ok(later.every((run) => run <= 520), `runs of pairs between turns: ${later.slice(0, 20)}`)
  assert.ok(later.filter((run) => run >= 256).length >= later.length - 2, `runs of pairs between turns: ${later.slice(0, 20)}`)
})

test('a memory:// success answered in place does not overtake an earlier call still to settle', async () => {
  const lock = lockOn('order', { maxRetries: 0, retryDelayMs: 1 })
  const held = await lock.acquire('held', 10_000)
  const order = []
  const calls = [
    // A failure settles at the next loop turn, as a rejection.
    lock.acquire('held', 10_000).then(
      () => order.push('won a held lock'),
      (err) => order.push(`refused ${err.code}`),
    ),
    // Free keys: answered in place, were nothing pending before them.
    lock.tryAcquire('a', 10_000).then((handle) => order.push(handle === null ? 'a null' : 'a won')),
    lock.tryAcquire('b', 10_000).then((handle) => order.push(handle === null ? 'b null' : 'b won')),
  ]
  await Promise.all(calls)
  assert.deepEqual(order, ['refused ELOCKED', 'a won', 'b won'])
  const first = []
  await Promise.all([
    lock.tryAcquire('c', 10_000).then((handle) => first.push(`c ${handle !== null}`)),
    lock.tryAcquire('d', 10_000).then((handle) => first.push(`d ${handle !== null}`)),
  ])
  assert.deepEqual(first, ['c true', 'd true'])
  await held.release()
})

test('a memory:// acquisition answered in place has recorded its holder', async () => {
  const lock = lockOn('recorded')
  const other = lockOn('recorded')
  const handle = await lock.acquire('k', 10_000)
  assert.equal(typeof handle.token, 'string')
  assert.ok(handle.isHeld)
  assert.equal(await other.isLocked('k'), true)
  assert.equal(await other.tryAcquire('k', 10_000), null)
  await handle.release()
  assert.equal(await other.isLocked('k'), false)
  const again = await other.tryAcquire('k', 10_000)
  assert.notEqual(again, null)
  assert.notEqual(again.token, handle.token)
  await again.release()
})

// A release hands the lock over here only to a waiter asleep: one whose own attempt is on
// its way (a poll, under load) is left to it, the release going as with a server
// (src/core/wait/wake.rs `reserve`). Such a hand-over is told to the waiter's onEvent inside
// the release call; rounds go on until one was, and every one that was is held to the rule.
const ROUNDS = 20

/** Runs `round(heardInCall)` until a hand-over was told inside the release (at most ROUNDS). */
async function untilHandedOverHere(name, options, round) {
  let here = 0
  for (let i = 0; i < ROUNDS && here === 0; i++) {
    const told = []
    const lock = lockOn(`${name}-${i}`, {
      ...options,
      onEvent: (event) => {
        if (event.key === 'k') told.push(event.type)
        options.onEvent?.(event, lock)
      },
    })
    const handedHere = await round(lock, () => told.includes('handed-over'))
    if (handedHere) here++
  }
  assert.ok(here > 0, `no hand-over was told inside its release in ${ROUNDS} rounds`)
}

for (const lendOnHandover of [false, true]) {
  test(`a memory:// release that hands the lock to a waiter of this process lets the waiter go on first (lendOnHandover: ${lendOnHandover})`, async () => {
    await untilHandedOverHere(`handover-${lendOnHandover}`, { lendOnHandover }, async (lock, toldHandedOver) => {
      const held = await lock.acquire('k', 10_000)
      const order = []
      const waiting = lock.waitForLock('k', 5_000, 10_000).then((handle) => {
        order.push('waiter')
        return handle
      })
      // The wait has found the key held and waits for its release.
      await new Promise((resolve) => setTimeout(resolve, 20))
      assert.deepEqual(order, [])
      const released = held.release()
      const here = toldHandedOver()
      await released
      order.push('releaser')
      const handle = await waiting
      if (here) assert.deepEqual(order, ['waiter', 'releaser'])
      await handle.release()
      return here
    })
  })
}

test('memory:// calls made from an onEvent listener while a hand-over is told all settle, and the release too', async () => {
  const nested = []
  let handedOver = 0
  let lock
  const onEvent = (event) => {
    if (event.key === 'k' && event.type === 'handed-over') handedOver++
    // User code run while the lock's news is told: its calls must neither overtake what is
    // being told nor take the place of the answer the running call keeps.
    // Only the contended key's: a side key's own 'acquired' would start the next call.
    if (event.key === 'k' && (event.type === 'handed-over' || event.type === 'acquired')) {
      nested.push(lock.tryAcquire(`side-${nested.length}`, 10_000).then((handle) => handle?.release()))
    }
  }
  lock = lockOn('listener', { lendOnHandover: true, onEvent })
  for (let round = 0; round < 20; round++) {
    const held = await lock.acquire('k', 10_000)
    const waiting = lock.waitForLock('k', 5_000, 10_000)
    await new Promise((resolve) => setImmediate(resolve))
    const released = held.release()
    const settled = await Promise.race([
      Promise.all([released, waiting.then((handle) => handle.release())]).then(() => 'settled'),
      new Promise((resolve) => setTimeout(resolve, 5_000, 'pending')),
    ])
    assert.equal(settled, 'settled', `round ${round}: a release or a hand-over never settled`)
    // Both released: nothing holds it (a waiter's attempt that landed after it was answered
    // once won it for nobody, held until its TTL).
    assert.equal(await lock.isLocked('k'), false, `round ${round}: k is still held after both releases`)
  }
  await Promise.all(nested)
  assert.ok(handedOver > 0, 'no hand-over was told in 20 rounds')
  assert.ok(nested.length >= 20, `${nested.length} calls made from the listener`)
})

test('with the global Promise replaced (Bluebird), a failed memory:// call still rejects with our error and the caller in its stack', async () => {
  const lock = lockOn('replaced', { maxRetries: 0 })
  const holder = lockOn('replaced')
  const held = await holder.acquire('k', 10_000)
  const Original = Promise
  // As a promise library installed globally does: our native promises are not instances.
  global.Promise = class Replaced extends Original {}
  let err
  try {
    async function callerOfTheFailure() {
      return await lock.acquire('k', 10_000)
    }
    err = await callerOfTheFailure().catch((e) => e)
  } finally {
    global.Promise = Original
  }
  await held.release()
  assert.equal(err?.code, 'ELOCKED', `expected ELOCKED, got ${err}`)
  assert.ok(err.stack.includes('async callerOfTheFailure '), `the caller is not in the stack:\n${err.stack}`)
})

for (const lendOnHandover of [false, true]) {
  test(`a memory:// call made by an onEvent listener while news is told settles after the calls settled with that news, and takes no one's answer (lendOnHandover: ${lendOnHandover})`, async () => {
    let order
    let made
    const onEvent = (event, lock) => {
      // Told inside the release, right before the waiter it hands the lock to is settled
      // (lent: after the release's own answer was kept, which the listener's must not take).
      if (event.key === 'k' && event.type === 'handed-over') {
        made.push(lock.tryAcquire('side', 10_000).then((handle) => {
          order.push('listener')
          return handle?.release()
        }))
      }
    }
    await untilHandedOverHere(`told-${lendOnHandover}`, { lendOnHandover, onEvent }, async (lock, toldHandedOver) => {
      order = []
      made = []
      const held = await lock.acquire('k', 10_000)
      const waiting = lock.waitForLock('k', 5_000, 10_000).then((handle) => {
        order.push('waiter')
        return handle
      })
      // The wait has found the key held and waits for its release.
      await new Promise((resolve) => setTimeout(resolve, 20))
      const releasing = held.release()
      const here = toldHandedOver()
      const released = await Promise.race([
        releasing.then(() => 'released'),
        new Promise((resolve) => setTimeout(resolve, 2_000, 'pending')),
      ])
      assert.equal(released, 'released', 'the release never settled')
      const handle = await waiting
      await Promise.all(made)
      if (here) {
        assert.equal(made.length, 1, 'the listener was told of the hand-over')
        assert.deepEqual(order, ['waiter', 'listener'])
      }
      await handle.release()
      return here
    })
  })
}
