'use strict'

// OpenTelemetry from the `onEvent` hook: a span for each hold of a lock (acquired to
// released, or lost), a histogram of how long callers waited, and a counter of contention.
// The hook is `otelHook` below: a dozen lines. Runs on memory:// by default, on REDIS_URL
// when set:
//
//   npm install @opentelemetry/api
//   node examples/opentelemetry.js
//
// In production, register the OpenTelemetry SDK (NodeSDK, an exporter) instead of the tiny
// in-memory providers at the end of this file, which are here so that the example shows what
// it recorded without one.

let otel
try {
  otel = require('@opentelemetry/api')
} catch {
  console.log('This example needs the OpenTelemetry API package: npm install @opentelemetry/api')
  process.exit(0)
}
const { DistributedLock } = require('native-redis-lock')

/** An `onEvent` hook recording spans and metrics through `tracer` and `meter`. */
function otelHook(tracer, meter) {
  const waited = meter.createHistogram('lock.wait', { unit: 'ms', description: 'Time from asking for a lock to holding it' })
  const contended = meter.createCounter('lock.contended', { description: 'Attempts that found the lock held' })
  const holds = new Map()
  return (event) => {
    const attributes = { 'lock.api': event.api, 'lock.key': event.key }
    if (event.type === 'acquired') {
      waited.record(event.waitedMs, attributes)
      const span = tracer.startSpan('lock.hold', { attributes: { ...attributes, 'lock.fence': event.fence } })
      holds.set(`${event.key} ${event.fence}`, span)
    } else if (event.type === 'contended') {
      contended.add(1, attributes)
    } else if (event.type === 'released' || event.type === 'lost') {
      const span = holds.get(`${event.key} ${event.fence}`)
      holds.delete(`${event.key} ${event.fence}`)
      if (event.type === 'lost') span?.setStatus({ code: otel.SpanStatusCode.ERROR, message: event.error?.message })
      span?.end()
    }
  }
}

async function main() {
  const recorded = installInMemoryProviders()
  const url = process.env.REDIS_URL || 'memory://otel-example'
  const lock = new DistributedLock(url, {
    keyPrefix: 'otel-example:',
    onEvent: otelHook(otel.trace.getTracer('native-redis-lock-example'), otel.metrics.getMeter('native-redis-lock-example')),
  })
  // Three workers take turns at one lock: the second and third wait for it.
  await Promise.all(
    [1, 2, 3].map(async () => {
      const handle = await lock.waitForLock('report', 5_000, 10_000)
      await new Promise((resolve) => setTimeout(resolve, 20))
      await handle.release()
    }),
  )
  for (const span of recorded.spans) {
    console.log(`span ${span.name} ${span.attributes['lock.key']} fence ${span.attributes['lock.fence']}: ${span.durationMs.toFixed(1)} ms`)
  }
  const waits = recorded.metrics['lock.wait'] ?? []
  console.log(`lock.wait: ${waits.map((ms) => ms.toFixed(1)).join(', ')} ms; lock.contended: ${recorded.metrics['lock.contended']?.length ?? 0}`)
  // One line for machines (the example's test reads it).
  console.log(JSON.stringify({ url: url.startsWith('memory://') ? 'memory' : 'redis', spans: recorded.spans, metrics: recorded.metrics }))
}

/** Minimal tracer and meter providers keeping what they are given (the SDK's job, really). */
function installInMemoryProviders() {
  const recorded = { spans: [], metrics: {} }
  const span = (name, options) => {
    const started = performance.now()
    const record = { name, attributes: { ...options?.attributes }, status: 'unset', durationMs: 0 }
    return {
      setStatus: (status) => void (record.status = status.code === otel.SpanStatusCode.ERROR ? 'error' : 'ok'),
      setAttribute: (key, value) => void (record.attributes[key] = value),
      end: () => {
        record.durationMs = performance.now() - started
        recorded.spans.push(record)
      },
      isRecording: () => true,
      spanContext: () => otel.INVALID_SPAN_CONTEXT,
    }
  }
  const instrument = (name) => {
    const values = (recorded.metrics[name] = [])
    const keep = (value) => void values.push(value)
    return { record: keep, add: keep }
  }
  otel.trace.setGlobalTracerProvider({ getTracer: () => ({ startSpan: span }) })
  otel.metrics.setGlobalMeterProvider({ getMeter: () => ({ createHistogram: instrument, createCounter: instrument }) })
  return recorded
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
