'use strict'

// The soak's sampling schedule (scripts/soak/sampler.js): a sample settles 250 ms between its
// collection and its reads, no sample begins while one settles, and stopping the run stops the
// settle under way (its timer cleared, its reads never made), leaving no timer of the sampler
// behind: the soak counts every resource left after close as a leak. No Redis.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { startSampler, SETTLE_MS } = require('../scripts/soak/sampler')

const microtasks = () => new Promise((resolve) => setImmediate(resolve))
const timeouts = () => process.getActiveResourcesInfo().filter((type) => type === 'Timeout').length

/** A sampler every `everyMs` whose begins and finishes are logged in `events`, in order. */
function logged(everyMs, settleMs = SETTLE_MS) {
  const events = []
  const errors = []
  let n = 0
  const sampler = startSampler({
    everyMs,
    settleMs,
    begin: () => {
      n += 1
      events.push(`begin ${n}`)
      return n
    },
    finish: (begun) => events.push(`finish ${begun}`),
    onError: (err) => errors.push(err),
  })
  return { sampler, events, errors }
}

test('sampler: a sample finishes 250 ms after it began, and ticks while it settles begin none', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'setTimeout'] })
  const { sampler, events, errors } = logged(100)
  t.mock.timers.tick(100)
  assert.deepEqual(events, ['begin 1'])
  // Ticks at 200 and 300 come while sample 1 settles (until 350): skipped.
  t.mock.timers.tick(200)
  await microtasks()
  assert.deepEqual(events, ['begin 1'])
  t.mock.timers.tick(49)
  await microtasks()
  assert.deepEqual(events, ['begin 1'])
  t.mock.timers.tick(1)
  await microtasks()
  assert.deepEqual(events, ['begin 1', 'finish 1'])
  // The next tick (400) begins the next sample.
  t.mock.timers.tick(50)
  await microtasks()
  assert.deepEqual(events, ['begin 1', 'finish 1', 'begin 2'])
  for (let i = 0; i < 20; i += 1) {
    t.mock.timers.tick(50)
    await microtasks()
  }
  // Never two begins without a finish between them.
  events.forEach((event, i) => assert.equal(event.split(' ')[0], i % 2 ? 'finish' : 'begin', events.join(', ')))
  await sampler.stop()
  assert.deepEqual(errors, [])
})

test('sampler: stopped while a sample settles, its reads are never made and no tick comes after', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'setTimeout'] })
  const { sampler, events, errors } = logged(100)
  t.mock.timers.tick(100)
  t.mock.timers.tick(100)
  assert.deepEqual(events, ['begin 1'])
  await sampler.stop()
  t.mock.timers.tick(5000)
  await microtasks()
  assert.deepEqual(events, ['begin 1'])
  assert.deepEqual(errors, [])
})

test('sampler: stopped while a sample settles, no timer of it is left, and stop resolves once the sample has returned', async () => {
  const before = timeouts()
  // A settle far longer than the test: only stop can end it.
  const { sampler, events } = logged(10, 60_000)
  while (events.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  assert.deepEqual(events, ['begin 1'])
  // The tick's interval and the settle's timer.
  assert.equal(timeouts(), before + 2)
  const started = performance.now()
  await sampler.stop()
  assert.ok(performance.now() - started < 1000, 'stop waited out the settle')
  assert.equal(timeouts(), before)
  await new Promise((resolve) => setTimeout(resolve, 50))
  assert.deepEqual(events, ['begin 1'])
})

test('sampler: stopped between samples, no timer of it is left', async () => {
  const before = timeouts()
  const { sampler, events } = logged(10, 1)
  while (!events.includes('finish 2')) await new Promise((resolve) => setTimeout(resolve, 5))
  await sampler.stop()
  assert.equal(timeouts(), before)
  const seen = events.length
  await new Promise((resolve) => setTimeout(resolve, 50))
  assert.equal(events.length, seen)
})

test('sampler: what a sample throws goes to onError, and sampling goes on', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'setTimeout'] })
  const errors = []
  let begins = 0
  const sampler = startSampler({
    everyMs: 100,
    settleMs: 10,
    begin: () => {
      begins += 1
      if (begins === 1) throw new Error('begin failed')
    },
    finish: () => {
      throw new Error('finish failed')
    },
    onError: (err) => errors.push(err.message),
  })
  t.mock.timers.tick(100)
  await microtasks()
  t.mock.timers.tick(100)
  await microtasks()
  t.mock.timers.tick(10)
  await microtasks()
  assert.deepEqual(errors, ['begin failed', 'finish failed'])
  assert.equal(begins, 2)
  await sampler.stop()
})
