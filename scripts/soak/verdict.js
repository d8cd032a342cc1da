'use strict'

// The soak's fail rules (docs/plans/cross-process.md §5), applied to what the processes
// reported. Figures are printed; only these rules decide the exit code.

/** The value a quarter of the way up `values` (sorted), interpolated between neighbours. */
const lowerQuartile = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (sorted.length - 1) / 4
  const below = Math.floor(at)
  return sorted[below] + (sorted[Math.min(below + 1, sorted.length - 1)] - sorted[below]) * (at - below)
}

/**
 * RSS of one process: the lower quartile of its last window against that of the window right
 * after warm-up. Warm-up is the first 2 minutes, or 10 % of the run when that is longer, but
 * never more than 20 % of it (a 1-minute run warms up for 12 s); a window is 3 minutes, or a
 * third of what follows warm-up in shorter runs.
 *
 * Each sample follows a full collection and the allocator's return of freed pages
 * (scripts/soak/worker.js), yet one can still catch a burst of traffic in flight: pages
 * allocated for a moment, which only raise samples. A leak raises every sample of the late
 * window, its lowest too; noise raises some. So each window is judged by its lower quartile,
 * not its median (one sample in two high moves a median, a 1-minute run having 8 a window).
 *
 * A sample's RSS is read less `v8Idle`, V8's heap pages that hold no live object after the
 * sample's full gc (scripts/soak/tally.js): V8 keeps a varying share of the pages a collection
 * frees, which moved one process's RSS between 94.8 and 102.6 MB over 40 s of samples with its
 * live heap flat, and failed a 1-minute run by 0.08 % past the bar in CI. A leak of JS objects
 * still counts (their pages hold live objects), as does any native one.
 */
function rssRule(samples, runMs) {
  if (samples.length < 6) return { skipped: `${samples.length} samples` }
  const start = samples[0].at
  const warmupMs = Math.min(Math.max(120_000, runMs * 0.1), runMs * 0.2)
  const windowMs = Math.min(180_000, (runMs - warmupMs) / 3)
  const held = (s) => s.rss - (s.v8Idle ?? 0)
  const early = samples.filter((s) => s.at - start >= warmupMs && s.at - start < warmupMs + windowMs).map(held)
  const end = samples[samples.length - 1].at
  const late = samples.filter((s) => end - s.at < windowMs).map(held)
  if (!early.length || !late.length) return { skipped: 'no samples in a window' }
  const afterWarmup = lowerQuartile(early)
  const last = lowerQuartile(late)
  return { afterWarmupMb: afterWarmup, lastMb: last, ratio: Math.round((last / afterWarmup) * 1000) / 1000, ok: last <= 1.05 * afterWarmup }
}

/** Resource types with more left after close than at start. */
function leakedResources(atStart, afterClose) {
  const leaked = {}
  for (const [type, count] of Object.entries(afterClose ?? {})) {
    if (count > (atStart?.[type] ?? 0)) leaked[type] = `${atStart?.[type] ?? 0} -> ${count}`
  }
  return leaked
}

/**
 * `processes`: [{ label, samples, result, wholeRun, exitMs, crashed }]; `sections`: from
 * checkSections. Answers { failures, rss }.
 */
function verdict({ processes, sections, runMs }) {
  const failures = []
  const rss = {}
  for (const p of processes) {
    if (p.crashed) failures.push(`${p.label}: ${p.crashed}`)
    if (!p.result) {
      if (!p.killed) failures.push(`${p.label}: no closing figures`)
      continue
    }
    for (const f of p.result.failures ?? []) failures.push(`${p.label}: ${f}`)
    for (const u of p.result.unsettled ?? []) {
      failures.push(`${p.label}: ${u.kind} unsettled past its bound (${u.boundMs} ms) + 1 s`)
    }
    if (p.result.pendingAtClose) failures.push(`${p.label}: ${p.result.pendingAtClose} ops pending at close`)
    const leaked = leakedResources(p.result.resourcesAtStart, p.result.resourcesAfterClose)
    if (Object.keys(leaked).length) failures.push(`${p.label}: resources left after close ${JSON.stringify(leaked)}`)
    if (p.exitMs !== undefined && p.exitMs > 1000) failures.push(`${p.label}: exit took ${Math.round(p.exitMs)} ms`)
    if (p.wholeRun) {
      rss[p.label] = rssRule(p.samples, runMs)
      if (rss[p.label].ok === false) {
        failures.push(`${p.label}: RSS (less idle V8 pages) lower quartile ${rss[p.label].lastMb} MB at the end > 1.05 x ${rss[p.label].afterWarmupMb} MB after warm-up`)
      }
    }
  }
  failures.push(...sections.failures)
  return { failures, rss }
}

module.exports = { verdict, rssRule, leakedResources, lowerQuartile }
