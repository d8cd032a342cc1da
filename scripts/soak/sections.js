'use strict'

// Critical sections: GET then SET a counter on the data server (never restarted), so two
// holders at once lose an update. Each SET is written in one MULTI with its record (counter
// key, grant time, send time, id): a process SIGKILLed mid-section leaves both or neither.
// The end (after the reply) and a hold that went in doubt are noted apart.
const { clock } = require('./tally')

const RECORDS = 'soak:sections'
const ENDS = 'soak:ends'
const DOUBT = 'soak:doubt'

class Sections {
  /** `data`: an ioredis client of the data server. */
  constructor(data) {
    this.data = data
    this.seq = 0
  }

  /** Runs one section on `counterKey`, granted at `grantAt` (clock()); answers its id. */
  async run(counterKey, grantAt) {
    const id = `${process.pid}:${++this.seq}`
    const value = Number((await this.data.get(counterKey)) ?? 0)
    const sentAt = clock()
    await this.data.multi().set(counterKey, value + 1).rpush(RECORDS, `${counterKey}|${grantAt}|${sentAt}|${id}`).exec()
    await this.data.hset(ENDS, id, clock())
    return id
  }

  /** The hold of section `id` could not be confirmed to its end. */
  doubt(id) {
    return this.data.sadd(DOUBT, id)
  }
}

/**
 * Reads every section and counter back, and answers the failures (see judgeSections).
 * `restarts`: the clock() times the lock server was SIGKILLed.
 */
async function checkSections(data, options = {}) {
  const records = await data.lrange(RECORDS, 0, -1)
  const ends = await data.hgetall(ENDS)
  const doubt = await data.smembers(DOUBT)
  const counters = {}
  for (const line of records) {
    const counterKey = line.split('|')[0]
    if (!(counterKey in counters)) counters[counterKey] = Number((await data.get(counterKey)) ?? 0)
  }
  return judgeSections({ records, ends, doubt, counters }, options)
}

/**
 * The failures in what was read back: `records` ('counterKey|grantAt|sentAt|id' lines), `ends`
 * (id -> clock() after the SET's reply), `doubt` (ids), `counters` (counterKey -> value). A
 * counter other than the number of SETs recorded on it (an update lost to a second holder),
 * and two sections of one key overlapping in time (grant to reply), which counts for sections
 * in doubt too.
 */
function judgeSections({ records, ends, doubt: doubtIds, counters }, { restarts = [], excuseRestarts = false } = {}) {
  // A section whose hold spans a SIGKILL of the lock server went in doubt. The library tells
  // its holder at the close (onSuspended, `suspended`; isHeld and `acquired` false), and the
  // traffic notes the section in doubt when its hold says so at the end or its release fails,
  // but no section asks before its SET (it writes as a holder that ignores the doubt would,
  // with no fence), and Redis restarted empty lets a contender take the key meanwhile. With
  // `excuseRestarts`, such overlaps and the updates they lost are counted, not failed.
  const spansRestart = (section) => restarts.some((at) => section.start <= at && at <= section.end)
  const doubt = new Set(doubtIds)
  const byCounter = new Map()
  for (const line of records) {
    const [counterKey, grantAt, sentAt, id] = line.split('|')
    const end = Number(ends[id] ?? sentAt)
    if (!byCounter.has(counterKey)) byCounter.set(counterKey, [])
    byCounter.get(counterKey).push({ id, start: Number(grantAt), end, doubt: doubt.has(id) })
  }
  const failures = []
  let overlaps = 0
  let acrossRestarts = 0
  for (const [counterKey, sections] of byCounter) {
    const counter = counters[counterKey] ?? 0
    sections.sort((a, b) => a.start - b.start)
    let last = sections[0]
    let excused = 0
    for (const next of sections.slice(1)) {
      if (next.start < last.end) {
        const acrossRestart = spansRestart(last)
        if (acrossRestart) acrossRestarts += 1
        else overlaps += 1
        if (acrossRestart && excuseRestarts) excused += 1
        else if (failures.length < 10) {
          const kind = `${last.doubt || next.doubt ? 'in doubt' : 'clean'}${acrossRestart ? ', the first across a restart' : ''}`
          failures.push(`${counterKey}: sections ${last.id} and ${next.id} (${kind}) overlap by ${(last.end - next.start).toFixed(2)} ms`)
        }
      }
      if (next.end > last.end) last = next
    }
    // Each overlap can lose at most one update; only excused overlaps may explain a shortfall.
    if (counter > sections.length || counter < sections.length - excused) {
      failures.push(`${counterKey}: counter ${counter}, sections ${sections.length}`)
    }
  }
  return {
    sections: records.length,
    inDoubt: doubt.size,
    counters: byCounter.size,
    overlaps,
    overlapsAcrossRestarts: acrossRestarts,
    failures,
  }
}

module.exports = { Sections, checkSections, judgeSections }
