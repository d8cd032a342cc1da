'use strict'

// What one soak process counts: operations by kind, errors by code, grants, passes, lost
// locks, and operations still unsettled past their bound. Each op runs under its own
// deadline timer, so a promise that never settles is seen while the soak runs, not at exit.
const { randomBytes } = require('node:crypto')
const { performance } = require('node:perf_hooks')
const v8 = require('node:v8')

// This process's start, for what must not be shared with another process (section ids,
// memory:// names and their counters): a pid alone comes back, as a respawned child's can
// over a long soak.
const RUN = `${process.pid}-${randomBytes(4).toString('hex')}`

/** Milliseconds on CLOCK_MONOTONIC: one clock for every process of the machine (Linux). */
const clock = () => Number(process.hrtime.bigint()) / 1e6

// clock() less Date.now(), read where Date.now() ticks to its next millisecond: Date.now()
// floors to whole ms, so a reading at any other moment is up to 1 ms early, and clock() read
// beside it can be a descheduling late (as performance.now() beside clock() was, when
// performance.timeOrigin + performance.now() stood for the wall clock). The two clock()
// readings around the tick bound it, to TICK_WIDTH_MS once a try is not descheduled. NTP's
// slewing moves CLOCK_REALTIME and CLOCK_MONOTONIC alike (clock_gettime(2)): the offset moves
// only when the wall clock is stepped, which scripts/soak/wall-clock.js reports; it is read
// again each second so a step is followed, and a wide reading keeps the last narrow one.
let wallOffset
let wallOffsetAt = -Infinity
const TICK_WIDTH_MS = 0.05

function readWallOffset() {
  let best
  for (let attempt = 0; attempt < 20 && !(best?.width < TICK_WIDTH_MS); attempt += 1) {
    let before = clock()
    let wall = Date.now()
    const from = wall
    let earlier = before
    while (wall === from) {
      earlier = before
      before = clock()
      wall = Date.now()
    }
    const after = clock()
    // Date.now() turned `wall` after the previous read of it (after `earlier`), before `after`.
    const width = after - earlier
    if (!(best?.width <= width)) best = { width, offset: (earlier + after) / 2 - wall }
  }
  return best
}

/**
 * `epochMs` (Date.now()'s scale, as lease expiries and Redis TIME are) on clock()'s scale: a
 * lease's end the library counted on the wall clock lands where the holder's monotonic
 * reckoning from the same send puts it, within half of TICK_WIDTH_MS, the wall clock unstepped.
 */
function clockOfEpoch(epochMs) {
  const now = clock()
  if (now - wallOffsetAt >= 1000) {
    const reading = readWallOffset()
    if (wallOffset === undefined || reading.width < TICK_WIDTH_MS) wallOffset = reading.offset
    wallOffsetAt = now
  }
  return epochMs + wallOffset
}

class Tally {
  constructor() {
    this.ops = {}
    this.errors = {}
    this.grants = 0
    this.passes = 0
    this.lost = 0
    this.unsettled = []
    this.pending = 0
  }

  bump(table, name) {
    table[name] = (table[name] ?? 0) + 1
  }

  /** `promise`, counted under `kind`; noted as unsettled once it outlives `boundMs` + 1 s. */
  watch(kind, boundMs, promise) {
    this.bump(this.ops, kind)
    this.pending += 1
    const started = performance.now()
    const timer = setTimeout(() => {
      this.unsettled.push({ kind, boundMs, startedAgoMs: Math.round(performance.now() - started) })
    }, boundMs + 1000)
    const done = () => {
      clearTimeout(timer)
      this.pending -= 1
    }
    promise.then(done, done)
    return promise
  }

  /**
   * Counts `err` by its code; expected refusals (ELOCKED, EABORTED, ...) are data, not failures:
   * no error count decides the verdict (scripts/soak/verdict.js). The restart quarantine's
   * refusals (ECONNECTION, syncguard's ServiceUnavailable, naming restartQuarantineMs) are
   * counted apart, under `<code>.quarantine`, so a server that refuses connections is told
   * from one that is up and quarantined.
   */
  error(err) {
    // DOMExceptions (AbortError, TimeoutError) carry numeric legacy codes: their name says more.
    let code = typeof err?.code === 'string' ? err.code : (err?.name ?? 'unknown')
    if (typeof err?.message === 'string' && err.message.includes('restartQuarantineMs (')) code += '.quarantine'
    this.bump(this.errors, code)
    if (code === 'TypeError' && !this.typeErrorShown) {
      this.typeErrorShown = true
      console.error(err)
    }
  }

  /** The counts since the last call, and resets them (unsettled ops stay listed). */
  take() {
    const out = { ops: this.ops, errors: this.errors, grants: this.grants, passes: this.passes, lost: this.lost }
    this.ops = {}
    this.errors = {}
    this.grants = 0
    this.passes = 0
    this.lost = 0
    return out
  }
}

/** Adds the counts of `b` into `a` (objects of numbers, nested one level). */
function addCounts(a, b) {
  for (const [name, value] of Object.entries(b)) {
    if (typeof value === 'number') a[name] = (a[name] ?? 0) + value
    else if (value && typeof value === 'object' && !Array.isArray(value)) addCounts((a[name] ??= {}), value)
  }
  return a
}

/** Active libuv resources of this process, by type. */
function resourcesByType() {
  const byType = {}
  for (const type of process.getActiveResourcesInfo()) byType[type] = (byType[type] ?? 0) + 1
  return byType
}

/**
 * One sample of this process's memory (MB) and resources. `liveHeap`: V8's used heap (bytes)
 * read straight after the sample's full gc, when RSS is read later (scripts/soak/worker.js).
 */
function sample(liveHeap) {
  const mem = process.memoryUsage()
  const heap = v8.getHeapStatistics()
  const live = liveHeap ?? heap.used_heap_size
  const mb = (n) => Math.round((n / 1048576) * 10) / 10
  return {
    rss: mb(mem.rss),
    // V8's heap pages in RSS that hold no live object after the sample's full gc: V8 keeps
    // some of the pages a collection frees for its next allocations, 7.8-11.5 MB of old space
    // from one sample to the next in a process whose live heap stayed at 7 MB. Pages kept, not
    // memory leaked: verdict.js's RSS rule takes them out.
    v8Idle: mb(Math.max(0, heap.total_physical_size - live)),
    heapUsed: mb(live),
    external: mb(mem.external),
    arrayBuffers: mb(mem.arrayBuffers),
    resources: resourcesByType(),
  }
}

module.exports = { Tally, addCounts, resourcesByType, sample, clock, clockOfEpoch, RUN }
