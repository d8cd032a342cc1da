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
 * The lower quartiles of `figure(sample)` over the window right after warm-up and the last
 * window. Warm-up is the first 2 minutes, or 10 % of the run when that is longer, but never
 * more than 20 % of it (a 1-minute run warms up for 12 s); a window is 3 minutes, or a third of
 * what follows warm-up in shorter runs.
 *
 * Each sample follows a full collection and the allocator's return of freed pages
 * (scripts/soak/worker.js), yet one can still catch a burst of traffic in flight: memory
 * allocated for a moment, which only raises samples. A leak raises every sample of the late
 * window, its lowest too; noise raises some. So each window is judged by its lower quartile,
 * not its median (one sample in two high moves a median, a 1-minute run having 8 a window).
 */
function windows(samples, runMs, figure) {
  if (samples.length < 6) return { skipped: `${samples.length} samples` }
  const start = samples[0].at
  const warmupMs = Math.min(Math.max(120_000, runMs * 0.1), runMs * 0.2)
  const windowMs = Math.min(180_000, (runMs - warmupMs) / 3)
  const early = samples.filter((s) => s.at - start >= warmupMs && s.at - start < warmupMs + windowMs).map(figure)
  const end = samples[samples.length - 1].at
  const late = samples.filter((s) => end - s.at < windowMs).map(figure)
  if (!early.length || !late.length) return { skipped: 'no samples in a window' }
  const afterWarmup = lowerQuartile(early)
  const last = lowerQuartile(late)
  return { afterWarmupMb: afterWarmup, lastMb: last, ratio: Math.round((last / afterWarmup) * 1000) / 1000 }
}

/** `judged` (from `windows`) grown past 5 % and past `slackMb` both: `ok` false. */
function grown(judged, slackMb) {
  if (judged.skipped) return judged
  const bar = Math.max(1.05 * judged.afterWarmupMb, judged.afterWarmupMb + slackMb)
  return { ...judged, ok: judged.lastMb <= bar }
}

// The RSS rule's slack: none, the 5 % alone. Read at once after the sample's collection, RSS
// moved with V8 handing back the pages it freed (a soak parent's RSS less idle V8 pages moved
// -3.7 %, -2.9 %, +6.5 % and +6.9 % over soaks in which nothing else grew past 0.5 MB; two reads
// a few ms apart after one gc differed by up to 17 MB, the later always lower); worker.js now
// reads it once that is done (SETTLE_MS), and a 30-minute soak's parent stayed within 2.8 %.
// The native and heap rules judge native allocations and the live JS heap finely; this one
// keeps what neither sees (mappings of our own, as the watchdog's table, thread stacks).
const RSS_SLACK_MB = 0
// The native and heap rules' slack: their figures' share caught in flight moves by tenths of a
// MB, and 5 % of the ~5 MB in live native allocations, or of the ~7 MB live heap, is inside it.
const FIGURE_SLACK_MB = 1

/**
 * RSS of one process, less `v8Idle`, V8's heap pages that hold no live object after the
 * sample's full gc (scripts/soak/tally.js): V8 keeps a varying share of the pages a collection
 * frees, which moved one process's RSS between 94.8 and 102.6 MB over 40 s of samples with its
 * live heap flat, and failed a 1-minute run by 0.08 % past the bar in CI. Fails past 5 % and
 * RSS_SLACK_MB of growth.
 */
function rssRule(samples, runMs) {
  return grown(windows(samples, runMs, (s) => s.rss - (s.v8Idle ?? 0)), RSS_SLACK_MB)
}

/**
 * What the C allocator has in live allocations (`nativeMb`, glibc's arenas and mmapped
 * blocks): every native allocation of the process, the Rust core's, its tokio thread's and
 * Node's, with none of V8's heap pages. Not what it holds from the system: that keeps the
 * extent of past peaks (8.4-10.4 MB from one sample to the next in a soak's parent, the live
 * figure at 5.1-5.6 MB), its free pages given back by the sample's malloc_trim, out of RSS.
 * Fails past 5 % and FIGURE_SLACK_MB of growth; skipped where the allocator cannot be asked.
 */
function nativeRule(samples, runMs) {
  if (!samples.every((s) => typeof s.nativeMb === 'number')) return { skipped: 'allocator not asked' }
  return grown(windows(samples, runMs, (s) => s.nativeMb), FIGURE_SLACK_MB)
}

/** V8's live heap after the sample's full gc: a leak of JS objects. As nativeRule. */
function heapRule(samples, runMs) {
  if (!samples.every((s) => typeof s.heapUsed === 'number')) return { skipped: 'no heap figures' }
  return grown(windows(samples, runMs, (s) => s.heapUsed), FIGURE_SLACK_MB)
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
 * checkSections. Answers { failures, rss, native, heap }.
 */
function verdict({ processes, sections, runMs }) {
  const failures = []
  const rss = {}
  const native = {}
  const heap = {}
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
      for (const [table, rule, what, slackMb] of [
        [rss, rssRule, 'RSS (less idle V8 pages)', RSS_SLACK_MB],
        [native, nativeRule, 'native memory (C allocator)', FIGURE_SLACK_MB],
        [heap, heapRule, 'live JS heap', FIGURE_SLACK_MB],
      ]) {
        const judged = (table[p.label] = rule(p.samples, runMs))
        if (judged.ok !== false) continue
        failures.push(
          `${p.label}: ${what} lower quartile ${judged.lastMb.toFixed(2)} MB at the end > ${judged.afterWarmupMb.toFixed(2)} MB after warm-up + ${slackMb ? `max(5 %, ${slackMb} MB)` : '5 %'}`,
        )
      }
    }
  }
  failures.push(...sections.failures)
  return { failures, rss, native, heap }
}

module.exports = { verdict, rssRule, nativeRule, heapRule, leakedResources, lowerQuartile }
