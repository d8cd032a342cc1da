'use strict'

// Turns bench/results.json into bench/RESULTS.md (tables) and bench/chart.svg (a hand-written
// bar chart of ours against the best peer per scenario). Returns the summary table as text.
const fs = require('node:fs')
const path = require('node:path')
const { median, fmt } = require('./util')
const { sameRun } = require('./runs')

const OURS = ['ours-distributed-lock', 'ours-distributed-lock-lend', 'ours-exclusive-lock', 'ours-lock-service']
const OURS_SHORT = {
  'ours-distributed-lock': 'DistributedLock',
  'ours-distributed-lock-lend': 'DistributedLock (lendOnHandover)',
  'ours-exclusive-lock': 'ExclusiveLock',
  'ours-lock-service': 'DistributedLockService',
}
const COLORS = { 'ours-distributed-lock': '#1f77b4', 'ours-distributed-lock-lend': '#9467bd', 'ours-exclusive-lock': '#ff7f0e', 'ours-lock-service': '#2ca02c' }
const SCENARIO_TITLE = {
  a: '(a) serial acquire + release on one key',
  b: '(b) 256 acquire + release pairs in flight on distinct keys',
  c: '(c) one key, 8 async workers, GET + SET of a counter inside the lock',
  c4: '(c4) one key, 4 processes with one worker each, GET + SET of a counter inside the lock',
  c16: '(c16) one key, 16 processes with one worker each, GET + SET of a counter inside the lock',
  d: '(d) the physical limit: redis-benchmark against the same server',
  e: '(e) held locks with auto-refresh',
  f: '(f) event-loop stall while releasing auto-refreshed locks (ours alone)',
  ra: '(ra) Redlock over 5 servers: serial acquire + release on one key',
  rb: '(rb) Redlock over 5 servers: 256 acquire + release pairs in flight on distinct keys',
  rc: '(rc) Redlock over 5 servers: one key, 8 async workers, GET + SET of a counter inside the lock',
}
// The Redlock scenarios' targets (issue 25): ours against the best Redlock peer, both placements.
const REDLOCK_TARGETS = [
  ['ra', 1.5, '(ra) Redlock serial pairs/s: >= 1.5x best Redlock peer'],
  ['rb', 1.5, '(rb) Redlock 256 in flight pairs/s: >= 1.5x best Redlock peer'],
]

const values = (rounds, key) => rounds.map((r) => r[key]).filter((v) => typeof v === 'number' && Number.isFinite(v))
const stat = (rounds, key) => {
  const v = values(rounds, key)
  return { median: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length }
}
const range = (s, digits) => (s.n ? `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})` : 'n/a')
const adapterEntries = (result) => Object.entries(result).filter(([id]) => !id.startsWith('_'))
const ratio = (x) => (Number.isFinite(x) ? `${x >= 10 ? x.toFixed(1) : x.toFixed(2)}×` : 'n/a')

function table(header, rows, leftColumns = [0]) {
  const lines = [`| ${header.join(' | ')} |`, `|${header.map((h, i) => (leftColumns.includes(i) ? '---' : '---:')).join('|')}|`]
  for (const row of rows) lines.push(`| ${row.join(' | ')} |`)
  return lines.join('\n')
}

/** Best peer (kind 'peer', highest median `key`) of one scenario result. */
function bestPeer(meta, result, key = 'rate', lowerIsBetter = false) {
  let best = null
  for (const [id, r] of Object.entries(result ?? {})) {
    if (id.startsWith('_') || meta.adapters[id]?.kind !== 'peer' || r.error || !r.rounds?.length) continue
    const m = stat(r.rounds, key).median
    if (!Number.isFinite(m)) continue
    if (!best || (lowerIsBetter ? m < best.value : m > best.value)) best = { id, name: meta.adapters[id].name, value: m }
  }
  return best
}

/** Per scenario and placement: { ours id -> { value, vsPeer, vsRaw } } plus the best peer. */
function comparisons(results) {
  const { meta } = results
  const out = []
  for (const [placement, data] of Object.entries(results.placements)) {
    for (const scenario of ['a', 'b', 'c', 'c4', 'c16']) {
      const result = data[scenario]
      if (!result) continue
      const peer = bestPeer(meta, result)
      const raw = result['ioredis-raw']?.rounds?.length ? stat(result['ioredis-raw'].rounds, 'rate').median : NaN
      const ours = {}
      for (const id of OURS) {
        if (!result[id]?.rounds?.length) continue
        const value = stat(result[id].rounds, 'rate').median
        ours[id] = { value, advantage: peer ? value / peer.value : NaN, ratio: peer ? value / peer.value : NaN, vsRaw: value / raw }
      }
      const unit = scenario.startsWith('c') ? 'sections/s' : 'pairs/s'
      out.push({ scenario, metric: `${unit}`, placement, peer, raw, ours, lowerIsBetter: false })
    }
    const e = data.e
    if (!e) continue
    for (const [key, metric] of [
      ['rssPerLockKB', 'RSS per held lock, KB'],
      ['cpuPercent', 'CPU of 1,000 held locks, % of a core'],
    ]) {
      const peer = bestPeer(meta, e, key, true)
      const ours = {}
      for (const id of OURS) {
        if (!e[id]?.rounds?.length) continue
        const value = stat(e[id].rounds, key).median
        ours[id] = { value, ratio: peer ? value / peer.value : NaN, advantage: peer ? peer.value / value : NaN }
      }
      if (Object.keys(ours).length) out.push({ scenario: 'e', metric, placement, peer, raw: NaN, lowerIsBetter: true, ours })
    }
  }
  return out
}

/**
 * The targets of the issue that asked for this bench, ours = DistributedLock (the main API),
 * each with what the same run measured and whether it is met.
 */
function targetsTable(results) {
  const { meta, placements } = results
  const ours = 'ours-distributed-lock'
  const rows = []
  const median = (result, id, key) => (result?.[id]?.rounds?.length ? stat(result[id].rounds, key).median : NaN)
  const maxOf = (result, id, key) => (result?.[id]?.rounds?.length ? Math.max(...values(result[id].rounds, key)) : NaN)
  const row = (target, placement, value, peer, ok, text) =>
    rows.push([target, placement, text ?? fmt(value, 2), peer ?? '—', ok === null ? 'n/a' : ok ? '**yes**' : '**no**'])
  // A pairs/s target: `id` at least `want` times the best peer's.
  // Not decided on rows of two runs (see runs.js).
  const againstPeer = (label, placement, scenario, id, want) => {
    const result = placements[placement][scenario]
    const peer = bestPeer(meta, result)
    const value = median(result, id, 'rate')
    const x = peer ? value / peer.value : NaN
    const apart = Number.isFinite(x) && !sameRun(results, placement, scenario, id, peer.id)
    const text = `${fmt(value)} (${ratio(x)}${apart ? ', rows of different runs' : ''})`
    row(label, placement, value, peer ? `${fmt(peer.value)} ${peer.name}` : null, Number.isFinite(x) && !apart ? x >= want : null, text)
  }
  for (const [placement, data] of Object.entries(placements)) {
    for (const [scenario, want, label] of [
      ['a', 1.0, '(a) serial pairs/s, pinned: >= 1.0x best peer'],
      ['b', 1.5, '(b) 256 in flight pairs/s, unpinned: >= 1.5x best peer'],
    ]) {
      if ((scenario === 'a') !== (placement === 'pinned') || !data[scenario]) continue
      againstPeer(label, placement, scenario, ours, want)
    }
    for (const [scenario, want, label] of REDLOCK_TARGETS) {
      if (data[scenario]) againstPeer(label, placement, scenario, 'ours-redlock', want)
    }
    const c = data.c
    if (c) {
      const peer = bestPeer(meta, c, 'ownerChangesPerSec')
      const value = median(c, ours, 'ownerChangesPerSec')
      const x = peer ? value / peer.value : NaN
      row('(c) owner changes/s, 8 workers: >= 20x best peer', placement, value, peer ? `${fmt(peer.value)} ${peer.name}` : null, Number.isFinite(x) ? x >= 20 : null, `${fmt(value)} (${ratio(x)})`)
      const wait = maxOf(c, ours, 'waitMax')
      row('(c) max wait: <= 50 ms', placement, wait, null, Number.isFinite(wait) ? wait <= 50 : null, `${fmt(wait, 1)} ms`)
      const cmds = median(c, ours, 'commandsPerOp')
      row('(c) Redis commands per section: <= 6', placement, cmds, null, Number.isFinite(cmds) ? cmds <= 6.005 : null, fmt(cmds, 2))
    }
    const e = data.e
    if (e) {
      const rssPeer = bestPeer(meta, e, 'rssPerLockKB', true)
      const rss = median(e, ours, 'rssPerLockKB')
      row('(e) RSS per held auto-refreshed lock: <= 0.5 KB', placement, rss, rssPeer ? `${fmt(rssPeer.value, 2)} KB ${rssPeer.name}` : null, Number.isFinite(rss) ? rss <= 0.5 : null, `${fmt(rss, 2)} KB`)
      const cpuPeer = bestPeer(meta, e, 'cpuPercent', true)
      const cpu = median(e, ours, 'cpuPercent')
      row('(e) CPU of 1,000 held locks at TTL 2 s: <= 0.3 % of a core', placement, cpu, cpuPeer ? `${fmt(cpuPeer.value, 2)} % ${cpuPeer.name}` : null, Number.isFinite(cpu) ? cpu <= 0.3 : null, `${fmt(cpu, 2)} %`)
    }
    const f = data.f
    if (f && !f.error) {
      const label = `(f) worst event-loop stall releasing ${fmt(f.locks, 0)} auto-refreshed locks: < 50 ms`
      row(label, placement, f.worstStallMs, null, Number.isFinite(f.worstStallMs) ? f.worstStallMs < 50 : null, `${fmt(f.worstStallMs, 1)} ms`)
    }
  }
  return table(['target (ours: DistributedLock)', 'placement', 'ours', 'best peer', 'met?'], rows, [0, 1])
}

// The issue's targets against what each API replaces: our drop-ins against a stand-in of their
// original package (kind 'original': the original's exact Redis commands through ioredis; see
// bench/adapters/original-*.js), and waitForLock on a free key against acquire.
/** A target as written: one decimal at least, two when it has them (0.95 is not 0.9). */
const target = (want) => {
  const shown = String(Math.round(want * 100) / 100)
  return shown.includes('.') ? shown : `${shown}.0`
}

const AGAINST_ORIGINAL = [
  { ours: 'ours-exclusive-lock', reference: 'original-exclusive-lock', label: 'ExclusiveLock ÷ original @logdna/exclusive-lock (stand-in)', want: 1.0 },
  { ours: 'ours-lock-service', reference: 'original-maestro', label: 'DistributedLockService ÷ original maestro DistributedLockService (stand-in)', want: 1.0 },
  // syncguard (issue 24): 1.0x serially, 1.5x at 256 in flight.
  { ours: 'ours-syncguard', reference: 'original-syncguard', label: 'syncguard backend.acquire + release ÷ the syncguard stand-in', want: { a: 1.0, b: 1.5 } },
  { ours: 'ours-syncguard-lock', reference: 'original-syncguard-lock', label: 'syncguard lock(fn) ÷ the syncguard stand-in', want: { a: 1.0, b: 1.5 } },
  { ours: 'ours-distributed-lock-wait', reference: 'ours-distributed-lock', label: 'DistributedLock.waitForLock (free key) ÷ DistributedLock.acquire', want: 0.9 },
  // Issue 27: tracing used (a hook, stats() read every 100) against none; counters always on.
  { ours: 'ours-distributed-lock-traced', reference: 'ours-distributed-lock', label: 'DistributedLock with onEvent and stats() ÷ without', want: 0.9 },
  // Issue 27: the counters, on by default, against none at all.
  { ours: 'ours-distributed-lock', reference: 'ours-distributed-lock-nostats', label: 'DistributedLock (stats on, the default) ÷ with stats: false', want: 0.95 },
  { ours: 'ours-exclusive-lock-each', reference: 'original-exclusive-lock-each', label: 'ExclusiveLock, one per acquisition ÷ the stand-in, one per acquisition', want: 1.0 },
  { ours: 'ours-lock-service-each', reference: 'original-maestro-each', label: 'DistributedLockService, one per acquisition ÷ the stand-in, one per acquisition', want: 1.0 },
  // @lilith/distributed-lock has no stand-in (its source is not public): against the best
  // peer made per acquisition (a lock manager, Redlock, or a per-key Mutex), as ours is.
  { ours: 'ours-distributed-lock-each', reference: ['redis-semaphore-each', 'sesamecare-redlock-each'], label: 'DistributedLock, one per acquisition ÷ the best peer, one per acquisition', want: 1.0 },
  // The embedded store against a redis-server on loopback, same API, same run (issue 23): 5x
  // serially, 2x at 256 in flight; the other two APIs are shown beside it.
  { ours: 'ours-distributed-lock-memory', reference: 'ours-distributed-lock', label: 'DistributedLock on memory:// ÷ on redis-server', want: { a: 5.0, b: 2.0 } },
  { ours: 'ours-exclusive-lock-memory', reference: 'ours-exclusive-lock', label: 'ExclusiveLock on memory:// ÷ on redis-server', want: 1.0 },
  { ours: 'ours-lock-service-memory', reference: 'ours-lock-service', label: 'DistributedLockService on memory:// ÷ on redis-server', want: 1.0 },
]

/** The reference of `pair` in `result`: its one adapter, or the best that ran of its list. */
function referenceOf(pair, result) {
  if (!Array.isArray(pair.reference)) return pair.reference
  let best = pair.reference[0]
  let value = -Infinity
  for (const id of pair.reference) {
    const r = result[id]
    const m = r?.rounds?.length ? stat(r.rounds, 'rate').median : NaN
    if (m > value) [best, value] = [id, m]
  }
  return best
}

/**
 * The median of ours ÷ reference within each round: the two ran seconds apart in every round,
 * so the VM's drift between rounds cancels out. Shown beside the ratio of medians, which
 * decides the target.
 */
function roundByRound(ours, reference) {
  const n = Math.min(ours?.rounds?.length ?? 0, reference?.rounds?.length ?? 0)
  if (!n) return NaN
  return median(Array.from({ length: n }, (_, i) => ours.rounds[i].rate / reference.rounds[i].rate))
}

/**
 * Per placement, for (a) and (b): each pair of AGAINST_ORIGINAL with its ratio of medians,
 * target and whether it is met. A pair neither side of which ran (results.json from before
 * these adapters existed) is left out; one side missing reads n/a.
 */
function originalsSection(results) {
  const parts = []
  for (const [placement, data] of Object.entries(results.placements)) {
    const rows = []
    for (const scenario of ['a', 'b']) {
      const result = data[scenario]
      if (!result) continue
      const cell = (id) => {
        const r = result[id]
        if (!r?.rounds?.length) return { text: r?.error ? `failed: ${r.error}` : 'not run', value: NaN }
        const s = stat(r.rounds, 'rate')
        return { text: range(s), value: s.median }
      }
      for (const pair of AGAINST_ORIGINAL) {
        const id = referenceOf(pair, result)
        if (!result[pair.ours] && !result[id]) continue
        const ours = cell(pair.ours)
        const reference = cell(id)
        // Which of a list it was: the best may differ by scenario and placement.
        if (Array.isArray(pair.reference) && Number.isFinite(reference.value)) reference.text += `, ${results.meta.adapters[id]?.name ?? id}`
        const x = ours.value / reference.value
        const want = typeof pair.want === 'number' ? pair.want : pair.want[scenario]
        // Rows of two runs (a --merge that re-measured one side): no rounds side by side,
        // and no target decided on them.
        const apart = Number.isFinite(x) && !sameRun(results, placement, scenario, pair.ours, id)
        const met = Number.isFinite(x) && !apart ? (x >= want ? '**yes**' : '**no**') : 'n/a'
        const byRound = apart ? NaN : roundByRound(result[pair.ours], result[id])
        rows.push([pair.label, `(${scenario}) pairs/s`, ours.text, reference.text, apart ? `${ratio(x)}, rows of different runs` : ratio(x), ratio(byRound), `>= ${target(want)}×`, met])
      }
    }
    if (!rows.length) continue
    parts.push(`### ${placement}`, '', table(['comparison', 'scenario', 'ours, median (min–max)', 'reference, median (min–max)', 'ratio of medians', 'median of each round\'s ratio', 'target', 'met?'], rows, [0, 1]), '')
  }
  if (!parts.length) return 'Not measured in this run: it has neither the stand-ins of the originals nor the waitForLock row (results from before they were added, or left out with `--adapters` / `--only`).\n'
  return parts.join('\n')
}

function summaryTable(results) {
  const rows = comparisons(results).map((c) => {
    const cell = (id) => {
      const o = c.ours[id]
      if (!o) return '—'
      return `${fmt(o.value, c.scenario === 'e' ? 2 : undefined)} (**${ratio(o.ratio)}**)`
    }
    return [
      `(${c.scenario}) ${c.metric}${c.lowerIsBetter ? ' (lower is better)' : ''}`,
      c.placement,
      c.peer ? `${fmt(c.peer.value, c.scenario === 'e' ? 2 : undefined)} ${c.peer.name}` : 'n/a',
      ...OURS.map(cell),
      Number.isFinite(c.raw) ? fmt(c.raw) : '—',
    ]
  })
  return table(
    ['scenario (median of rounds)', 'placement', 'best peer', ...OURS.map((id) => `ours: ${OURS_SHORT[id]} (÷ best peer)`), 'raw ioredis'],
    rows,
    [0, 1],
  )
}

/**
 * The rows of a scenario of acquire + release pairs: library, pairs/s, ratio to the best peer,
 * then `columns(result, failedAcquires)`.
 */
function pairRows(meta, result, columns) {
  const peer = bestPeer(meta, result)
  return adapterEntries(result).map(([id, r]) => {
    const name = meta.adapters[id]?.name ?? id
    if (r.error && !r.rounds.length) return [name, `failed: ${r.error}`]
    const s = stat(r.rounds, 'rate')
    const failed = r.rounds.reduce((n, x) => n + (x.failed ?? 0), 0)
    return [name, range(s), peer?.id === id ? 'best peer' : ratio(s.median / (peer?.value ?? NaN)), ...columns(r, failed)]
  })
}

function scenarioSection(results, scenario) {
  const { meta } = results
  const parts = [`## ${SCENARIO_TITLE[scenario]}`, '']
  for (const [placement, data] of Object.entries(results.placements)) {
    const result = data[scenario]
    if (!result) continue
    parts.push(`### ${placement}`, '')
    if (scenario === 'a' || scenario === 'b') {
      const rows = pairRows(meta, result, (r, failed) => [
        ...(scenario === 'a' ? [r.monitor ? `${fmt(r.monitor.requests, 1)} + ${fmt(r.monitor.scriptCommands, 1)}` : 'n/a'] : []),
        fmt(stat(r.rounds, 'commandsPerOp').median, 2),
        fmt(stat(r.rounds, 'nodeCpuUsPerOp').median, 1),
        fmt(stat(r.rounds, 'redisCpuPercent').median, 0),
        failed ? String(failed) : '0',
      ])
      parts.push(
        table(
          ['library', 'pairs/s median (min–max)', '÷ best peer', ...(scenario === 'a' ? ['requests + in-script cmds per pair (MONITOR)'] : []), 'Redis cmds/pair (commandstats, incl. in-script)', 'Node CPU µs/pair', 'Redis CPU %', 'failed acquires'],
          rows,
        ),
        '',
      )
      const plain = result._plainCommand
      if (plain?.ours?.length) {
        const o = stat(plain.ours, 'rate')
        const i = stat(plain.ioredis, 'rate')
        parts.push(
          'One call that does no lock work, serially (the per-call cost of crossing into the native side and back):',
          '',
          table(
            ['call', 'calls/s median (min–max)', 'µs per call'],
            [
              ['ours: `DistributedLock.isLocked` (one EXISTS)', range(o), fmt(1e6 / o.median, 0)],
              ['ioredis: `exists` (one EXISTS)', range(i), fmt(1e6 / i.median, 0)],
            ],
          ),
          '',
        )
      }
    } else if (scenario === 'ra' || scenario === 'rb') {
      const rows = pairRows(meta, result, (r, failed) => [
        `${fmt(stat(r.rounds, 'pairP50').median, 2)} / ${fmt(stat(r.rounds, 'pairP99').median, 2)}`,
        fmt(stat(r.rounds, 'nodeCpuUsPerOp').median, 1),
        String(failed),
      ])
      parts.push(table(['library', 'pairs/s median (min–max)', '÷ best peer', 'pair ms p50 / p99', 'Node CPU µs/pair', 'failed acquires'], rows), '')
    } else if (scenario === 'c' || scenario === 'c4' || scenario === 'c16' || scenario === 'rc') {
      const peer = bestPeer(meta, result)
      const rows = adapterEntries(result).map(([id, r]) => {
        const name = meta.adapters[id]?.name ?? id
        if (r.error && !r.rounds.length) return [name, `failed: ${r.error}`]
        const s = stat(r.rounds, 'rate')
        const exact = r.rounds.every((x) => x.exact)
        const errors = r.rounds.reduce((n, x) => n + (x.errors ?? 0), 0)
        return [
          name,
          range(s),
          peer?.id === id ? 'best peer' : ratio(s.median / (peer?.value ?? NaN)),
          fmt(stat(r.rounds, 'ownerChangesPerSec').median),
          `${fmt(stat(r.rounds, 'waitP50').median, 2)} / ${fmt(stat(r.rounds, 'waitP99').median, 1)} / ${fmt(Math.max(...values(r.rounds, 'waitMax')), 0)}`,
          fmt(stat(r.rounds, 'commandsPerOp').median, 2),
          fmt(stat(r.rounds, 'nodeCpuUsPerOp').median, 0),
          exact ? 'yes' : `**NO** (${r.rounds.map((x) => `${x.counter}/${x.ops}`).join(', ')})`,
          String(errors),
        ]
      })
      parts.push(
        table(
          ['library', 'critical sections/s median (min–max)', '÷ best peer', 'owner changes/s', 'wait ms p50 / p99 / max', `Redis cmds/section (commandstats${scenario === 'rc' ? ' of the first of the 5 servers' : ''}, incl. 2 for the counter)`, 'Node CPU µs/section', 'counter exact', 'wait errors'],
          rows,
        ),
        '',
      )
    } else if (scenario === 'd') {
      const rows = Object.values(result).map((c) => [c.label, range(stat(c.rounds, 'rate')), `\`${c.command}\``])
      const r = (id) => stat(result[id]?.rounds ?? [], 'rate').median
      const pair1 = 1 / (1 / r('set-1') + 1 / r('evalsha-1'))
      const pair16 = 1 / (1 / r('set-16') + 1 / r('evalsha-16'))
      rows.push(['⇒ acquire + release pairs/s, 1 connection (harmonic)', fmt(pair1), 'compare with (a)'])
      rows.push(['⇒ acquire + release pairs/s, 1 connection, 16 in flight', fmt(pair16), 'compare with (b)'])
      parts.push(table(['redis-benchmark', 'requests/s median (min–max)', 'command (`<port>`: the private server)'], rows, [0, 2]), '')
    } else if (scenario === 'e') {
      const p = meta.params
      const rows = Object.entries(result).map(([id, r]) => {
        const name = meta.adapters[id]?.name ?? id
        if (!r.rounds.length) return [name, `failed: ${r.error}`, '', '', '', '', '']
        return [
          name,
          range(stat(r.rounds, 'rssPerLockKB'), 2),
          fmt(stat(r.rounds, 'heapPerLockKB').median, 2),
          range(stat(r.rounds, 'cpuPercent'), 2),
          fmt(stat(r.rounds, 'redisCpuPercent').median, 2),
          fmt(stat(r.rounds, 'commandsPerSec').median),
          String(r.rounds.reduce((n, x) => n + x.lost, 0)),
        ]
      })
      parts.push(
        `${fmt(p.heldLocks, 0)} locks held for RSS, then ${fmt(p.heldCpuLocks, 0)} held for ${p.heldSeconds} s for CPU; TTL ${p.heldTtlMs} ms, refresh every ${p.heldRefreshMs} ms for both. One process per library and round.`,
        '',
        table(
          ['library', 'RSS per held lock, KB median (min–max)', 'JS heap per lock, KB', `CPU of ${fmt(p.heldCpuLocks, 0)} held locks, % of a core (min–max)`, 'Redis CPU %', 'Redis cmds/s (commandstats)', 'lost locks'],
          rows,
        ),
        '',
      )
    } else if (scenario === 'f') {
      if (result.error) {
        parts.push(`failed: ${result.error}`, '')
        continue
      }
      parts.push(
        `\`node bench/release-stall.js\`: ${fmt(result.locks, 0)} \`autoRefresh\` DistributedLock handles (TTL ${fmt(result.ttlMs, 0)} ms) on one connection, released 1,000 calls at a time; the stall is \`monitorEventLoopDelay\`'s maximum during the release.`,
        '',
        table(
          ['worst stall', 'p99 stall', '1 ms timer worst late', 'release time', 'per lock', 'watchdog entries visited per release', 'still watched / lost'],
          [[`${fmt(result.worstStallMs, 1)} ms`, `${fmt(result.p99StallMs, 1)} ms`, `${fmt(result.worstTimerDriftMs, 1)} ms`, `${fmt(result.releaseMs, 0)} ms`, `${fmt(result.releaseUsPerLock, 1)} µs`, fmt(result.visitedPerRelease, 2), `${result.watchedAfter} / ${result.lost}`]],
          [],
        ),
        '',
      )
    }
  }
  return parts.join('\n')
}

function chart(results) {
  const bars = []
  for (const c of comparisons(results)) {
    const group = `${c.scenario === 'e' ? (c.metric.startsWith('RSS') ? '(e) RSS/lock' : '(e) CPU') : `(${c.scenario}) ${c.metric}`}`
    for (const id of OURS) if (c.ours[id] && Number.isFinite(c.ours[id].advantage)) bars.push({ group, placement: c.placement, id, value: c.ours[id].advantage })
  }
  const groups = []
  for (const b of bars) {
    const key = `${b.group}|${b.placement}`
    let g = groups.find((x) => x.key === key)
    if (!g) groups.push((g = { key, group: b.group, placement: b.placement, bars: [] }))
    g.bars.push(b)
  }
  const bw = 22
  const gap = 26
  const left = 70
  const top = 60
  const plotH = 300
  const groupW = (g) => Math.max(g.bars.length * bw, 70)
  const width = left + groups.reduce((w, g) => w + groupW(g) + gap, 0) + 40
  const height = top + plotH + 110
  const vals = bars.map((b) => b.value)
  const lo = Math.min(-1, Math.floor(Math.log10(Math.min(...vals, 1)) * 2) / 2)
  const hi = Math.max(1, Math.ceil(Math.log10(Math.max(...vals, 1)) * 2) / 2)
  const y = (v) => top + plotH - ((Math.log10(v) - lo) / (hi - lo)) * plotH
  const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;')
  const svg = []
  svg.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`)
  svg.push(`<rect width="100%" height="100%" fill="white"/>`)
  svg.push(`<text x="${left}" y="20" font-size="14" font-weight="bold">native-redis-lock vs the best JS peer (log scale; above 1 = ours better)</text>`)
  svg.push(`<text x="${left}" y="38" fill="#555">rates: ours ÷ best peer; costs (e): best peer ÷ ours. ${esc(results.meta.command)}, ${esc(results.meta.date.slice(0, 10))}</text>`)
  for (const t of [0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]) {
    if (Math.log10(t) < lo - 1e-9 || Math.log10(t) > hi + 1e-9) continue
    const yy = y(t).toFixed(1)
    svg.push(`<line x1="${left}" x2="${width - 30}" y1="${yy}" y2="${yy}" stroke="${t === 1 ? '#000' : '#ddd'}" stroke-width="${t === 1 ? 1.5 : 1}"/>`)
    svg.push(`<text x="${left - 6}" y="${(+yy + 4).toFixed(1)}" text-anchor="end">${t}×</text>`)
  }
  let x = left + gap / 2
  for (const g of groups) {
    const gx = x
    x += (groupW(g) - g.bars.length * bw) / 2
    for (const b of g.bars) {
      const y1 = Math.min(y(b.value), y(1))
      const h = Math.abs(y(b.value) - y(1))
      svg.push(`<rect x="${x}" y="${y1.toFixed(1)}" width="${bw - 3}" height="${Math.max(1, h).toFixed(1)}" fill="${COLORS[b.id]}"><title>${esc(OURS_SHORT[b.id])} ${esc(g.group)} ${g.placement}: ${b.value.toFixed(2)}×</title></rect>`)
      const ty = b.value >= 1 ? y(b.value) - 3 : y(b.value) + 11
      svg.push(`<text x="${x + (bw - 3) / 2}" y="${ty.toFixed(1)}" text-anchor="middle" font-size="9">${b.value.toFixed(b.value >= 10 ? 0 : 2)}</text>`)
      x += bw
    }
    x = gx + groupW(g)
    const cx = gx + groupW(g) / 2
    svg.push(`<text x="${cx}" y="${top + plotH + 18}" text-anchor="middle">${esc(g.group)}</text>`)
    svg.push(`<text x="${cx}" y="${top + plotH + 32}" text-anchor="middle" fill="#555">${g.placement}</text>`)
    x += gap
  }
  let lx = left
  for (const id of OURS) {
    svg.push(`<rect x="${lx}" y="${top + plotH + 55}" width="12" height="12" fill="${COLORS[id]}"/>`)
    svg.push(`<text x="${lx + 16}" y="${top + plotH + 65}">ours: ${OURS_SHORT[id]}</text>`)
    lx += 190
  }
  svg.push('</svg>')
  return `${svg.join('\n')}\n`
}

function writeReport(results, dir) {
  const { meta } = results
  const targets = targetsTable(results)
  const originals = originalsSection(results)
  const summary = summaryTable(results)
  const md = [
    '# Benchmark results',
    '',
    `Command: \`${meta.command}\` (from the repository root), ${meta.date}${meta.quick ? ' — **quick mode**: short rounds, fewer of them; use the full run for figures to quote' : ''}.`,
    `Took ${fmt(meta.seconds ?? NaN, 0)} s.`,
    ...(meta.remeasured ?? []).map((m) => `Re-measured after it: (${m.scenarios.join('), (')}) in the ${m.placements.join(' and ')} placement${m.placements.length > 1 ? 's' : ''}${m.adapters ? `, rows ${m.adapters.join(', ')}` : ''}, by \`${m.command}\`, ${m.date} (${fmt(m.seconds, 0)} s); those rows are from that run.`),
    '',
    `Machine: ${meta.cpu}, ${meta.kernel}; Node ${meta.node}; ${meta.redis ?? 'redis-server'} (private, on loopback).`,
    `Versions: ${Object.entries(meta.versions).map(([k, v]) => `${k} ${v ?? '?'}`).join(', ')}.`,
    `Rounds: ${meta.params.pairRounds ?? meta.params.rounds} per library for (a) and (b), ${fmt(meta.params.pairRoundMs ?? meta.params.roundMs, 0)} ms each; ${meta.params.rounds} for (c), (c4) and (c16), ${fmt(meta.params.roundMs, 0)} ms each; after one warm-up of ${fmt(meta.params.warmupMs, 0)} ms per library, in an order rotated every round; (d) ${meta.params.benchRounds} round(s) of \`-n ${meta.params.benchN}\`; (e) ${meta.params.heldRounds} round(s) per library.`,
    'Placements: **unpinned** (the scheduler places Redis, the Node JS thread and our tokio threads on any core) and **pinned** (Redis and the whole Node worker process on core 0 via `taskset`).',
    '',
    'Figures are medians of the rounds, with min–max in brackets. "÷ best peer" is ours divided by the best JavaScript lock package in the same placement (for (e), lower is better). The raw ioredis row is not a lock package: it is the JS ceiling (SET NX PX + an EVALSHA compare-and-delete, nothing else); in (ra) and (rb) the five bare sockets row is the same over the 5 servers, settled at the 3rd reply, with no client library. The "original: … (stand-in)" rows are not peers either: they stand for the packages ours replaces, and are compared with ours in their own table.',
    '',
    '![ratios](chart.svg)',
    '',
    '## Targets',
    '',
    'The targets set for this benchmark, for our main API (DistributedLock), against the best JavaScript lock package in the same run.',
    '',
    targets,
    '',
    '## Ours against the original we replace',
    '',
    'Our drop-in APIs against a stand-in of the package each replaces (the original is not on the registry here: the stand-in sends its exact Redis commands, in its order, through ioredis; see README.md), and `waitForLock` on a free key against `acquire`. Stand-ins are not peers: they never count as the best peer.',
    '',
    originals,
    '## Summary',
    '',
    summary,
    '',
    ...['a', 'b', 'c', 'c4', 'c16', 'd', 'e', 'f', 'ra', 'rb', 'rc'].filter((s) => Object.values(results.placements).some((p) => p[s])).map((s) => scenarioSection(results, s)),
    'See README.md for what each scenario measures and how to read the figures.',
    '',
  ].join('\n')
  fs.writeFileSync(path.join(dir, 'RESULTS.md'), md)
  fs.writeFileSync(path.join(dir, 'chart.svg'), chart(results))
  return `${targets}\n\n${originals}\n${summary}`
}

module.exports = { writeReport, comparisons }
