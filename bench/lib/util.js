'use strict'

// Small helpers shared by the bench scripts: sleeping, statistics, number formatting, and a
// require of our own package that survives a rebuild of the addon happening at the same time.
const path = require('node:path')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function sleepSync(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

const ROOT = path.join(__dirname, '..', '..')
/** Where `requireOurs` loads the package from: paired.js points it at another build's copy. */
const ours = { root: ROOT }

/**
 * require() of our package or one of its subpaths ('', 'exclusive-lock', 'maestro'), retried
 * for up to a minute: the .node file may be mid-rewrite when another build runs.
 */
function requireOurs(subpath = '') {
  const target = subpath ? path.join(ours.root, subpath) : ours.root
  const deadline = Date.now() + 60_000
  for (;;) {
    try {
      return require(target)
    } catch (err) {
      if (Date.now() > deadline) throw err
      process.stderr.write(`  require(${subpath || '..'}) failed (${err.message.split('\n')[0]}); retrying in 2 s\n`)
      sleepSync(2000)
    }
  }
}

/**
 * A lock held through a library's `using(routine)`, which extends it while the routine runs
 * (scenario e): resolves once the routine has started, with `{ release }` that ends it; `null`
 * when the lock was not acquired. A failure after that (an extension that failed) calls
 * `onLost`.
 */
function holdThroughUsing(start, onLost) {
  return new Promise((resolve) => {
    let finish
    const done = new Promise((r) => (finish = r))
    let held = false
    const running = start(async () => {
      held = true
      resolve({ release: () => (finish(), running.catch(() => {})) })
      await done
    })
    running.catch(() => (held ? onLost() : resolve(null)))
  })
}

function quantile(sorted, q) {
  if (sorted.length === 0) return NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[i]
}

function median(values) {
  const s = values.filter(Number.isFinite).sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

function fmt(value, digits) {
  if (value === null || value === undefined || !Number.isFinite(value)) return 'n/a'
  const d = digits ?? (Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2)
  return value.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d })
}

/** Rotates `list` left by `n`: round r of an interleaved run uses rotate(adapters, r). */
function rotate(list, n) {
  const k = ((n % list.length) + list.length) % list.length
  return list.slice(k).concat(list.slice(0, k))
}

module.exports = { holdThroughUsing, sleep, sleepSync, requireOurs, quantile, median, fmt, rotate, ROOT, ours }
