'use strict'

// One soak process's share (the parent's or a child's): traffic on each backend, a sample of
// memory, resources and counts every `sampleMs`, then a clean stop that closes everything it
// opened and compares the resources left with those at its start.
const { monitorEventLoopDelay } = require('node:perf_hooks')
const v8 = require('node:v8')
const Redis = require('ioredis')
const { watchdogStats, collectNativeMemory, nativeMemory } = require('../../lib/native')
const { Tally, sample, resourcesByType, RUN } = require('./tally')
const { Sections } = require('./sections')
const { Traffic } = require('./traffic')
const { startSampler } = require('./sampler')

const failures = []
process.on('unhandledRejection', (reason) => failures.push(`unhandledRejection: ${reason?.stack ?? reason}`))
process.on('uncaughtException', (err) => failures.push(`uncaughtException: ${err?.stack ?? err}`))

/** The native watchdog's locks kept alive on `url` (the only native diagnostic exposed yet). */
function watched(url) {
  try {
    return watchdogStats({ url }).watched
  } catch {
    return null
  }
}

/**
 * Runs until `stopped` resolves; `onSample(sample)` gets each sample. Answers the closing
 * figures: resources at start and after close, ops still unsettled, failures seen.
 */
async function runProcess({ lockUrl, dataUrl, backends, actors, sampleMs, quarantineMs = 0, stopped, onSample }) {
  const resourcesAtStart = resourcesByType()
  const tally = new Tally()
  const data = new Redis(dataUrl, { maxRetriesPerRequest: 1 })
  const sections = new Sections(data)
  const traffics = backends.map((name) => {
    const backend =
      name === 'memory'
        ? { name, url: `memory://soak-${RUN}`, space: `memory-${RUN}` }
        : { name, url: lockUrl, space: 'redis', quarantineMs }
    return new Traffic(backend, tally, sections)
  })
  for (const traffic of traffics) traffic.start(actors)
  // The event loop's longest stall per sample: a holder stalled past its TTL writes late.
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  const sampler = startSampler({
    everyMs: sampleMs,
    begin: () => {
      const stallMaxMs = Math.round(loopDelay.max / 1e5) / 10
      loopDelay.reset()
      // A full collection first (with --expose-gc, as `npm run soak` runs), then the native
      // allocator's freed pages given back: RSS then follows what is live, not how far either
      // heap happened to grow since it last let go. RSS is read once V8 has handed back what
      // the collection freed (scripts/soak/sampler.js).
      globalThis.gc?.()
      // What the collection left live, read at once: by the time RSS has settled, the heap also
      // holds the traffic's garbage (a 30-minute soak's parent read 12.7 -> 14.2 MB so, 7.1 -> 7.6
      // at once), which would count as neither idle pages nor a leak.
      return { stallMaxMs, liveHeap: v8.getHeapStatistics().used_heap_size }
    },
    finish: ({ stallMaxMs, liveHeap }) => {
      // Read after the settle too, so it holds the traffic's Buffers of those 250 ms: tenths of a
      // MB, inside the native rule's slack.
      collectNativeMemory()
      const native = nativeMemory()
      onSample({
        pid: process.pid,
        at: Date.now(),
        ...sample(liveHeap),
        // The C allocator's figures (MB): in live allocations (verdict.js's native rule), and
        // taken from the system, which keeps the extent of past peaks, its free pages given back.
        nativeMb: native === null ? undefined : Math.round(native.inUseMb * 1000) / 1000,
        nativeFromSystemMb: native === null ? undefined : Math.round(native.fromSystemMb * 1000) / 1000,
        watched: Object.fromEntries(traffics.map((t) => [t.backend.name, watched(t.backend.url)])),
        pending: tally.pending,
        stallMaxMs,
        ...tally.take(),
      })
    },
    onError: (err) => failures.push(`sample failed: ${err?.stack ?? err}`),
  })
  await stopped
  // The sample settling, if any, stopped with the run: its timer is not counted as left after close.
  await sampler.stop()
  loopDelay.disable()
  await Promise.all(traffics.map((traffic) => traffic.stop()))
  const last = tally.take()
  await data.quit()
  // Let closed sockets and timers leave the loop before counting what is left.
  await new Promise((resolve) => setTimeout(resolve, 100))
  return {
    pid: process.pid,
    last,
    resourcesAtStart,
    resourcesAfterClose: resourcesByType(),
    pendingAtClose: tally.pending,
    unsettled: tally.unsettled,
    failures,
  }
}

module.exports = { runProcess }
