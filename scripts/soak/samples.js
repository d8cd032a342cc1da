'use strict'

// What the soak's parent keeps of the samples every process sends it (scripts/soak/worker.js),
// folded in as each arrives rather than kept whole. A sample's count objects (ops, errors) get
// their keys in the order the traffic happened to meet them, so V8 gives nearly each one
// hidden classes of its own, pinned as long as the sample lives: about 5 KB a sample, 24
// samples a minute, and the parent's heap grew 0.12 MB a minute over a 30-minute soak (heap
// snapshots at minutes 3 and 9: new Maps, DescriptorArrays, property arrays), while its
// children, which keep no samples, stayed flat. The parent's RSS, which the verdict judges as
// the library's, grew with it. Kept now: per process `{ at, rss, v8Idle, nativeMb, heapUsed }` a
// sample (the memory rules, rssSamplesMb), its latest sample (the minute's line), the counts
// since the last line, and one row a minute for the JSON; counts sit in Maps, which take any
// key order in one shape.

/** One process's samples as the parent keeps them. */
class SampleLog {
  constructor() {
    // { at, rss, v8Idle, nativeMb, heapUsed } per sample: what verdict.js's memory rules read.
    this.samples = []
    this.last = undefined
    this.fresh = newCounts()
    this.freshPid = undefined
    this.freshStallMs = 0
  }

  add(sample) {
    this.samples.push({ at: sample.at, rss: sample.rss, v8Idle: sample.v8Idle, nativeMb: sample.nativeMb, heapUsed: sample.heapUsed })
    this.last = sample
    addSampleCounts(this.fresh, sample)
    this.freshPid ??= sample.pid
    this.freshStallMs = Math.max(this.freshStallMs, sample.stallMaxMs ?? 0)
  }

  /** The counts since the last call, with the pid and longest loop stall of their samples; resets them. */
  takeFresh() {
    const out = { counts: this.fresh, pid: this.freshPid, stallMaxMs: this.freshStallMs }
    this.fresh = newCounts()
    this.freshPid = undefined
    this.freshStallMs = 0
    return out
  }
}

/** Per-minute figures of every process: per process the minute's last memory figures, counts summed. */
class MinuteTable {
  constructor(started) {
    this.started = started
    this.rows = []
  }

  add(label, sample) {
    const m = Math.floor((sample.at - this.started) / 60_000)
    const row = (this.rows[m] ??= {
      minute: m + 1,
      rss: {},
      heapUsed: {},
      external: {},
      nativeMb: {},
      nativeFromSystemMb: {},
      arrayBuffers: {},
      resources: {},
      watched: {},
      stallMaxMs: {},
      counts: newCounts(),
    })
    const stallKey = `${label} (${sample.pid})`
    row.stallMaxMs[stallKey] = Math.max(row.stallMaxMs[stallKey] ?? 0, sample.stallMaxMs ?? 0)
    row.rss[label] = sample.rss
    row.heapUsed[label] = sample.heapUsed
    row.external[label] = sample.external
    row.nativeMb[label] = sample.nativeMb
    row.nativeFromSystemMb[label] = sample.nativeFromSystemMb
    row.arrayBuffers[label] = sample.arrayBuffers
    row.resources[label] = sample.resources
    row.watched[label] = sample.watched
    addSampleCounts(row.counts, sample)
  }

  /** The rows for the JSON, counts as plain objects. */
  toJSON() {
    return this.rows.filter(Boolean).map(({ counts, ...row }) => ({ ...row, ...countsObject(counts) }))
  }
}

function newCounts() {
  return { ops: new Map(), errors: new Map(), grants: 0, passes: 0, lost: 0 }
}

function addSampleCounts(counts, sample) {
  for (const table of ['ops', 'errors']) {
    for (const [name, n] of Object.entries(sample[table] ?? {})) counts[table].set(name, (counts[table].get(name) ?? 0) + n)
  }
  counts.grants += sample.grants ?? 0
  counts.passes += sample.passes ?? 0
  counts.lost += sample.lost ?? 0
}

/** `counts` as the JSON and the minute's line show them. */
function countsObject(counts) {
  return { ops: Object.fromEntries(counts.ops), errors: Object.fromEntries(counts.errors), grants: counts.grants, passes: counts.passes, lost: counts.lost }
}

module.exports = { SampleLog, MinuteTable, countsObject }
