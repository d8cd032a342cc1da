'use strict'

// Synthetic soak sections (scripts/soak/sections.js), as several processes would leave them on
// the data server: records pushed in the order their SETs ran, which is not the order of their
// grants (a stalled holder writes long after later holders were granted), with the overlaps,
// ties, doubts, verdicts, notes and missing fields the checker has to read. Seeded, so a run
// can be compared with the verdicts an earlier checker gave on the same data.

/** mulberry32: a small seeded generator, so the same seed gives the same sections anywhere. */
function generator(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// clock() readings are ms since boot with ns digits: the same magnitude and precision here.
const BASE = 50_000_000
const us = (x) => Math.round(x * 1e6) / 1e6

/**
 * `count` sections over `keys` counter keys from `processes` process starts, a share `stalled`
 * of them held 1-2.5 s. Answers
 * { sections (in the order their SETs ran), counters, doubtWithoutRecord, restarts, wallSteps }.
 */
function scenario(seed, { count = 3000, keys = 8, processes = 5, stalled = 0.03 } = {}) {
  const random = generator(seed)
  const pick = (list) => list[Math.floor(random() * list.length)]
  const runs = Array.from({ length: processes }, (_, i) => `${4000 + i}-${(0x1000_0000 + i * 0x1234567).toString(16)}`)
  const seq = new Map(runs.map((run) => [run, 0]))
  const keyNames = Array.from({ length: keys }, (_, i) => `soak:count:${i % 2 ? 'redis' : `memory-${runs[i % processes]}`}:${pick(['dl', 'sg', 'ex', 'maestro'])}:k${i}`)
  const sections = []
  const clocks = keyNames.map(() => BASE + random() * 50)
  const previous = keyNames.map(() => undefined)
  for (let n = 0; n < count; n += 1) {
    const k = Math.floor(random() * keys)
    const prev = previous[k]
    const roll = random()
    let start
    let duration = 1 + random() * 15
    if (prev && roll < 0.1) start = prev.end - random() * 3
    else if (prev && roll < 0.15) start = prev.start
    else start = clocks[k] + 0.5 + random() * 5
    // A holder stalled past its lease: the key moves on while it sits, and its record comes late.
    if (roll > 1 - stalled) duration = 1000 + random() * 1500
    start = us(start)
    const end = us(start + duration)
    clocks[k] = Math.max(clocks[k], roll > 1 - stalled ? start + 30 : end)
    const run = pick(runs)
    seq.set(run, seq.get(run) + 1)
    const told = random()
    const section = {
      counterKey: keyNames[k],
      id: `${run}:${seq.get(run)}`,
      grantAt: start,
      sentAt: us(end - 0.3),
      readAt: random() < 0.05 ? undefined : (start + 0.1).toFixed(3),
      end: random() < 0.03 ? undefined : end,
      writeAt: (end - 0.2).toFixed(3),
      api: random() < 0.05 ? undefined : pick(['dl.using', 'dl', 'sg.lock', 'sg.backend', 'ex', 'maestro']),
      expiresAt: random() < 0.1 ? undefined : (start + pick([5, 30, 1000]) - random() * 2).toFixed(3),
      heldSince: random() < 0.3 ? (start - random() * 10).toFixed(3) : undefined,
      told: told < 0.6 ? 'ok' : told < 0.75 ? 'notHeld' : told < 0.8 ? 'lost' : told < 0.85 ? 'notOurs,releaseFailed' : undefined,
      note: random() < 0.1 ? `fence ${n} token ${Math.floor(random() * 1e8).toString(16)}` : undefined,
      doubt: random() < 0.1,
    }
    previous[k] = { start, end }
    sections.push(section)
  }
  const counters = {}
  for (const s of sections) counters[s.counterKey] = (counters[s.counterKey] ?? 0) + 1
  // Most counters exact; some short by updates lost to overlaps, one over.
  for (const key of keyNames) {
    const roll = random()
    if (roll < 0.3) counters[key] -= 1 + Math.floor(random() * 3)
    else if (roll < 0.4) counters[key] += 1
  }
  const last = Math.max(...clocks)
  const restarts = Array.from({ length: 6 }, () => us(BASE + random() * (last - BASE))).sort((a, b) => a - b)
  const wallSteps = Array.from({ length: 4 }, () => ({ at: us(BASE + random() * (last - BASE)), ms: us((random() - 0.3) * 900) }))
  // The data server ran the SETs in the order of their time there: the records' order.
  sections.sort((a, b) => Number(a.writeAt) - Number(b.writeAt))
  return { sections, counters, doubtWithoutRecord: ['4999-deadbeef:1', '4999-deadbeef:2'], restarts, wallSteps }
}

/** What the old checkSections read back from the data server, for judgeSections. */
function readBackOf({ sections, counters, doubtWithoutRecord }) {
  const records = []
  const ends = {}
  const leases = {}
  const told = {}
  const notes = {}
  const doubt = [...doubtWithoutRecord]
  for (const s of sections) {
    records.push([s.counterKey, s.grantAt, s.sentAt, s.id, ...(s.readAt === undefined ? [] : [s.readAt])].join('|'))
    if (s.end !== undefined) ends[s.id] = String(s.end)
    if (s.api !== undefined) leases[s.id] = `${s.writeAt}|${s.expiresAt ?? ''}|${s.api}|${s.heldSince ?? ''}`
    if (s.told !== undefined) told[s.id] = s.told
    if (s.note !== undefined) notes[s.id] = s.note
    if (s.doubt) doubt.push(s.id)
  }
  return { records, ends, doubt, counters, leases, told, notes }
}

/** Writes the sections on `redis` (ioredis) under the keys scripts/soak/sections.js uses. */
async function store(redis, scenarioData) {
  const { records, ends, doubt, counters, leases, told, notes } = readBackOf(scenarioData)
  const pipeline = redis.pipeline()
  for (let i = 0; i < records.length; i += 500) pipeline.rpush('soak:sections', ...records.slice(i, i + 500))
  for (const [key, table] of [['soak:ends', ends], ['soak:leases', leases], ['soak:told', told], ['soak:notes', notes]]) {
    if (Object.keys(table).length) pipeline.hset(key, table)
  }
  if (doubt.length) pipeline.sadd('soak:doubt', ...doubt)
  for (const [key, value] of Object.entries(counters)) pipeline.set(key, value)
  for (const [err] of await pipeline.exec()) if (err) throw err
}

module.exports = { scenario, readBackOf, store }
