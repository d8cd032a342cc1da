'use strict'

// What the soak's parent keeps of its processes' samples (scripts/soak/samples.js): the figures
// the verdict, the minute's line and the JSON need, and not the samples themselves, whose count
// objects with keys in random order pinned hidden classes enough to grow the parent's heap
// 0.12 MB a minute. No Redis: the samples are made here as a child sends them.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const v8 = require('node:v8')
const vm = require('node:vm')
const { SampleLog, MinuteTable } = require('../scripts/soak/samples')

const STARTED = 1_000_000
const KINDS = ['redis', 'memory'].flatMap((backend) => Array.from({ length: 20 }, (_, i) => `${backend}.op${i}`))
const CODES = ['ELOCKED', 'TimeoutError', 'AbortError', 'ETIMEDOUT', 'ELOST']

function shuffled(list) {
  const out = [...list]
  for (let i = out.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[out[i], out[j]] = [out[j], out[i]]
  }
  return out
}

/** Sample `i` as it arrives over IPC (JSON), its counts' keys in the order the traffic met them. */
function sample(i, { pid = 7, every = 2500 } = {}) {
  const ops = {}
  for (const kind of shuffled(KINDS)) ops[kind] = 1
  const errors = {}
  for (const code of shuffled(CODES)) errors[code] = 2
  const raw = { pid, at: STARTED + i * every, rss: 100 + i, v8Idle: 3 + i, nativeMb: 10 + i / 10, nativeFromSystemMb: 15, heapUsed: 7, external: 2, arrayBuffers: 0.1, resources: { Timeout: 3 }, watched: { redis: 1 }, pending: 0, stallMaxMs: i, ops, errors, grants: 1, passes: 2, lost: 0 }
  return JSON.parse(JSON.stringify(raw))
}

test('SampleLog keeps { at, rss, v8Idle, nativeMb, heapUsed } per sample and the counts since the last line', () => {
  const log = new SampleLog()
  for (let i = 0; i < 3; i += 1) log.add(sample(i))
  assert.deepEqual(log.samples, [0, 1, 2].map((i) => ({ at: STARTED + i * 2500, rss: 100 + i, v8Idle: 3 + i, nativeMb: 10 + i / 10, heapUsed: 7 })))
  assert.equal(log.last.rss, 102)
  const fresh = log.takeFresh()
  assert.equal(fresh.pid, 7)
  assert.equal(fresh.stallMaxMs, 2)
  assert.equal(fresh.counts.ops.get('redis.op3'), 3)
  assert.equal(fresh.counts.errors.get('ELOST'), 6)
  assert.deepEqual([fresh.counts.grants, fresh.counts.passes, fresh.counts.lost], [3, 6, 0])
  // Taken: the next line starts from nothing.
  assert.deepEqual(log.takeFresh(), { counts: { ops: new Map(), errors: new Map(), grants: 0, passes: 0, lost: 0 }, pid: undefined, stallMaxMs: 0 })
})

test('MinuteTable sums counts per minute and keeps each process its minute\'s last figures', () => {
  const table = new MinuteTable(STARTED)
  // 24 samples a process a minute (every 2.5 s), 30 of them: minute 1 full, minute 2 six.
  for (let i = 0; i < 30; i += 1) {
    table.add('parent', sample(i, { pid: 1 }))
    table.add('child 1', sample(i, { pid: 2 }))
  }
  const rows = table.toJSON()
  assert.equal(rows.length, 2)
  assert.deepEqual(Object.keys(rows[0]), ['minute', 'rss', 'heapUsed', 'external', 'nativeMb', 'nativeFromSystemMb', 'arrayBuffers', 'resources', 'watched', 'stallMaxMs', 'ops', 'errors', 'grants', 'passes', 'lost'])
  assert.deepEqual(rows[0].rss, { parent: 123, 'child 1': 123 })
  assert.deepEqual(rows[1].rss, { parent: 129, 'child 1': 129 })
  assert.deepEqual(rows[1].nativeMb, { parent: 12.9, 'child 1': 12.9 })
  assert.deepEqual(rows[0].stallMaxMs, { 'parent (1)': 23, 'child 1 (2)': 23 })
  assert.equal(rows[0].ops['memory.op19'], 48)
  assert.equal(rows[1].errors.AbortError, 24)
  assert.deepEqual([rows[1].grants, rows[1].passes, rows[1].lost], [12, 24, 0])
})

test('folding 40 minutes of samples keeps a fraction of what keeping them did', () => {
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc')
  const heapUsed = () => {
    gc()
    gc()
    return process.memoryUsage().heapUsed
  }
  // 960 samples, one process's 40 minutes (a 30-minute soak's parent gets about 720).
  const grown = (keep) => {
    const before = heapUsed()
    const kept = keep()
    const after = heapUsed()
    assert.ok(kept)
    return (after - before) / 1048576
  }
  const whole = grown(() => Array.from({ length: 960 }, (_, i) => sample(i)))
  const folded = grown(() => {
    const log = new SampleLog()
    const table = new MinuteTable(STARTED)
    for (let i = 0; i < 960; i += 1) {
      const s = sample(i)
      log.add(s)
      table.add('child 1', s)
    }
    return [log, table]
  })
  // Kept whole, each sample pinned hidden classes of its own: some 4.5 KB a sample. The
  // measure sees that, or it could not see the fold fail.
  assert.ok(whole > 3, `960 samples kept whole grew the heap ${whole.toFixed(2)} MB`)
  assert.ok(folded < 0.5, `960 samples folded grew the heap ${folded.toFixed(2)} MB`)
})
