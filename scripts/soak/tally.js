'use strict'

// What one soak process counts: operations by kind, errors by code, grants, passes, lost
// locks, and operations still unsettled past their bound. Each op runs under its own
// deadline timer, so a promise that never settles is seen while the soak runs, not at exit.
const { performance } = require('node:perf_hooks')

/** Milliseconds on CLOCK_MONOTONIC: one clock for every process of the machine (Linux). */
const clock = () => Number(process.hrtime.bigint()) / 1e6

/** `epochMs` (Date.now()'s scale, as lease expiries and Redis TIME are) on clock()'s scale. */
const clockOfEpoch = (epochMs) => epochMs - (performance.timeOrigin + performance.now() - clock())

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

  /** Counts `err` by its code; expected refusals (ELOCKED, EABORTED, ...) are data, not failures. */
  error(err) {
    // DOMExceptions (AbortError, TimeoutError) carry numeric legacy codes: their name says more.
    const code = typeof err?.code === 'string' ? err.code : (err?.name ?? 'unknown')
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

/** One sample of this process's memory (MB) and resources. */
function sample() {
  const mem = process.memoryUsage()
  const mb = (n) => Math.round((n / 1048576) * 10) / 10
  return {
    rss: mb(mem.rss),
    heapUsed: mb(mem.heapUsed),
    external: mb(mem.external),
    arrayBuffers: mb(mem.arrayBuffers),
    resources: resourcesByType(),
  }
}

module.exports = { Tally, addCounts, resourcesByType, sample, clock, clockOfEpoch }
