'use strict'

// Critical sections: GET then SET a counter on the data server (never restarted), so two
// holders at once lose an update. Each SET is written in one MULTI with its record (counter
// key, grant time, send time, id, and the data server's TIME at the GET): a process SIGKILLed
// mid-section leaves both or neither. The end (after the reply), the data server's TIME at the
// SET, the lease's expiry as the holder knew it at the end, the library's verdict after the
// section and a hold that went in doubt are noted apart.
const { clock, clockOfEpoch, RUN } = require('./tally')

const RECORDS = 'soak:sections'
const ENDS = 'soak:ends'
const DOUBT = 'soak:doubt'
// id -> 'writeAt|expiresAt|api|heldSince': the SET's time at the data server, the lease's end
// by the holder's own account when its section ended (both on clock()), the API that held it,
// and, where the hold can begin well before the section (syncguard's lock(fn) runs fn after its
// own acquire), when the acquisition was called.
const LEASES = 'soak:leases'
// id -> the library's verdict after the section: 'ok', or what it told the holder ('lost',
// 'notHeld', 'notOurs', 'releaseFailed', ...; comma-separated). maestro and ExclusiveLock
// tell no expiry and maestro's release answers true for a lock already gone: for them
// 'pastLease' says the release came more than a TTL after the acquire was called.
const TOLD = 'soak:told'
// id -> what the holder noted of its hold, for an overlap's line (fence, token, when it was told lost).
const NOTES = 'soak:notes'

/** Redis TIME's reply ([seconds, microseconds]) on clock()'s scale. */
const clockOfTime = ([seconds, micros]) => clockOfEpoch(Number(seconds) * 1000 + Number(micros) / 1000)

class Sections {
  /** `data`: an ioredis client of the data server. */
  constructor(data) {
    this.data = data
    this.seq = 0
  }

  /**
   * Runs one section on `counterKey` held under `api`, granted at `grantAt` (clock());
   * `leaseEnd()` answers when the lease ends by the holder's own account (clock()), read as
   * the section ends; `heldSince`, when given, is the time the acquisition was called, the
   * earliest the hold can have begun. Answers its id.
   */
  async run(counterKey, grantAt, api = '', leaseEnd = () => undefined, heldSince = undefined) {
    const id = `${RUN}:${++this.seq}`
    // The data server's own clock dates the GET and the SET: a stall of this process after
    // either does not move them, as it moves grantAt and the end.
    const [[, readTime], [, raw]] = await this.data.multi().time().get(counterKey).exec()
    const value = Number(raw ?? 0)
    const sentAt = clock()
    const record = `${counterKey}|${grantAt}|${sentAt}|${id}|${clockOfTime(readTime).toFixed(3)}`
    const replies = await this.data.multi().set(counterKey, value + 1).rpush(RECORDS, record).time().exec()
    const end = clock()
    const expiresAt = leaseEnd()
    const writeAt = clockOfTime(replies[2][1]).toFixed(3)
    await this.data
      .multi()
      .hset(ENDS, id, end)
      .hset(LEASES, id, `${writeAt}|${expiresAt === undefined ? '' : expiresAt.toFixed(3)}|${api}|${heldSince === undefined ? '' : heldSince.toFixed(3)}`)
      .exec()
    return id
  }

  /** `text`: what the holder of section `id` noted of its hold, shown should it overlap. */
  note(id, text) {
    return this.data.hset(NOTES, id, text)
  }

  /** The hold of section `id` could not be confirmed to its end. */
  doubt(id) {
    return this.data.sadd(DOUBT, id)
  }

  /** What the library told the holder of section `id` after it: [] when all was well. */
  told(id, words) {
    return this.data.hset(TOLD, id, words.length ? words.join(',') : 'ok')
  }
}

/**
 * Reads every section and counter back, and answers the failures (see judgeSections).
 * `restarts`: the clock() times the lock server was SIGKILLed; `wallSteps`: the wall
 * clock's steps against clock() (scripts/soak/wall-clock.js).
 */
async function checkSections(data, options = {}) {
  const records = await data.lrange(RECORDS, 0, -1)
  const ends = await data.hgetall(ENDS)
  const doubt = await data.smembers(DOUBT)
  const leases = await data.hgetall(LEASES)
  const told = await data.hgetall(TOLD)
  const notes = await data.hgetall(NOTES)
  const counters = {}
  for (const line of records) {
    const counterKey = line.split('|')[0]
    if (!(counterKey in counters)) counters[counterKey] = Number((await data.get(counterKey)) ?? 0)
  }
  return judgeSections({ records, ends, doubt, counters, leases, told, notes }, options)
}

// How much later than the other's grant a lease may end, by its holder's account, and still
// count as ended: what the comparison cannot resolve. A lease's end and a grant are both on
// clock() (CLOCK_MONOTONIC, one for every process). The library counts the end on the wall
// clock from its request's send, in whole ms rounded down, the wall clock read before the
// monotonic one (src/core/basics/clock.rs); Redis from a later reading of its own (whole ms;
// the key goes once its clock is past that; memory:// counts likewise on the monotonic clock);
// so every rounding puts the holder's account early, never late, and a load that stalls a
// process between two readings does too. clockOfEpoch moves the end onto clock() within
// 0.025 ms. What is left is that, and a step of the wall clock, which is named on the
// overlap's line (wallSteps) and not excused. It was 1 ms, for Redis's rounding alone, while
// the end came onto clock() by the wall clock's offset at the process's start and a reading
// of performance.now() and clock() a descheduling apart, and the library read its wall clock
// after the monotonic one: each of those could put an end later than the truth by a stall.
const LEASE_SLACK_MS = 0.1

/** One section as read back; `told` undefined when no verdict was written (the holder died). */
function sectionOf(line, ends, doubt, leases, told, notes = {}) {
  const [counterKey, grantAt, sentAt, id, readAt] = line.split('|')
  const [writeAt, expiresAt, api, heldSince] = (leases[id] ?? '').split('|')
  const number = (text) => (text === undefined || text === '' ? undefined : Number(text))
  return {
    counterKey,
    id,
    start: Number(grantAt),
    end: Number(ends[id] ?? sentAt),
    doubt: doubt.has(id),
    api: api || undefined,
    readAt: number(readAt),
    writeAt: number(writeAt),
    expiresAt: number(expiresAt),
    heldSince: number(heldSince),
    told: told[id],
    note: notes[id],
  }
}

/**
 * Whether `section`'s own lease had ended, by the library's account, before `other` was
 * granted, and the library told its holder so (lost, not held at the end, release not ours):
 * the lock then expired and moved on as documented, a stalled holder writing late.
 */
function expiredAndTold(section, other) {
  return (
    section.told !== undefined &&
    section.told !== 'ok' &&
    section.expiresAt !== undefined &&
    section.expiresAt <= other.start + LEASE_SLACK_MS
  )
}

/** What is known of one section of an overlap, for its line. */
function describe(section, other) {
  const parts = [`${section.api ?? '?'} held ${(section.end - section.start).toFixed(0)} ms`]
  if (section.expiresAt !== undefined) parts.push(`lease ended ${(other.start - section.expiresAt).toFixed(1)} ms before the other's grant`)
  else parts.push('lease end unknown')
  parts.push(`told ${section.told ?? 'nothing (no verdict)'}`)
  if (section.note !== undefined) parts.push(section.note)
  return `${section.id}: ${parts.join(', ')}`
}

/** The data server's account: the second's GET after the first's SET, or how far before. */
function dataOrder(first, second) {
  if (first.writeAt === undefined || second.readAt === undefined) return undefined
  const gap = second.readAt - first.writeAt
  return gap >= 0 ? `data server: the second's GET ${gap.toFixed(1)} ms after the first's SET` : `data server: the second's GET ${(-gap).toFixed(1)} ms BEFORE the first's SET`
}

/**
 * The failures in what was read back: `records` ('counterKey|grantAt|sentAt|id[|readAt]'
 * lines), `ends` (id -> clock() after the SET's reply), `doubt` (ids), `counters` (counterKey
 * -> value), and where the soak noted them `leases` (id -> 'writeAt|expiresAt|api') and `told`
 * (id -> the library's verdict). A counter other than the number of SETs recorded on it (an
 * update lost to a second holder), and two sections of one key overlapping in time (grant to
 * reply), which counts for sections in doubt too, fail; but an overlap where one holder's
 * lease had ended by its own account before the other's grant, and the library told that
 * holder, is the lock working as documented: counted and listed (`expired`), not failed.
 */
function judgeSections({ records, ends, doubt: doubtIds, counters, leases = {}, told = {}, notes = {} }, { restarts = [], excuseRestarts = false, wallSteps = [] } = {}) {
  // A section whose hold spans a SIGKILL of the lock server went in doubt. The library tells
  // its holder at the close (onSuspended, `suspended`; isHeld and `acquired` false), and the
  // traffic notes the section in doubt when its hold says so at the end or its release fails,
  // but no section asks before its SET (it writes as a holder that ignores the doubt would,
  // with no fence), and Redis restarted empty lets a contender take the key meanwhile. With
  // `excuseRestarts`, such overlaps and the updates they lost are counted, not failed.
  // A hold begins when Redis records it, which can be before the section (`heldSince`): a kill
  // between the two empties the store under a holder that has not written yet.
  const spansRestart = (section) => restarts.some((at) => Math.min(section.start, section.heldSince ?? Infinity) <= at && at <= section.end)
  // How far the kill nearest to the first's grant was, for the overlap's line: the evidence
  // whether a restart explains it.
  const nearestRestart = (section) => {
    if (restarts.length === 0) return undefined
    const at = restarts.reduce((best, r) => (Math.abs(r - section.start) < Math.abs(best - section.start) ? r : best))
    const gap = section.start - at
    return `nearest kill of the lock server ${Math.abs(gap).toFixed(1)} ms ${gap >= 0 ? 'before' : 'after'} the first's grant`
  }
  // A step forward of the wall clock while the first held, before the second's grant: Redis
  // ended the first's lease that much early, its holder counting on the monotonic clock and
  // told at its next refresh (README, restart quarantine, "Not guaranteed"). Named on the
  // overlap's line and counted; not excused.
  const wallStep = (first, second) => {
    const from = Math.min(first.start, first.heldSince ?? Infinity)
    const step = wallSteps.filter((s) => s.ms > 0 && from <= s.at && s.at <= second.start).sort((a, b) => b.ms - a.ms)[0]
    return step && `the wall clock stepped +${step.ms.toFixed(1)} ms ${(second.start - step.at).toFixed(1)} ms before the second's grant`
  }
  const doubt = new Set(doubtIds)
  const byCounter = new Map()
  // How many sections of each API ended with each verdict: a check that the verdicts are read.
  const verdicts = {}
  for (const line of records) {
    const section = sectionOf(line, ends, doubt, leases, told, notes)
    if (section.api !== undefined) {
      const name = `${section.api} ${section.told ?? 'none'}`
      verdicts[name] = (verdicts[name] ?? 0) + 1
    }
    if (!byCounter.has(section.counterKey)) byCounter.set(section.counterKey, [])
    byCounter.get(section.counterKey).push(section)
  }
  const failures = []
  const expired = []
  let overlaps = 0
  let acrossRestarts = 0
  let expiredOverlaps = 0
  let nearWallSteps = 0
  for (const [counterKey, sections] of byCounter) {
    const counter = counters[counterKey] ?? 0
    sections.sort((a, b) => a.start - b.start)
    let last = sections[0]
    let excused = 0
    for (const next of sections.slice(1)) {
      if (next.start < last.end) {
        const acrossRestart = spansRestart(last)
        const kind = `${last.doubt || next.doubt ? 'in doubt' : 'clean'}${acrossRestart ? ', the first across a restart' : ''}`
        let line = `${counterKey}: sections ${last.id} and ${next.id} (${kind}) overlap by ${(last.end - next.start).toFixed(2)} ms`
        if (last.api !== undefined || next.api !== undefined) {
          line += `; ${[describe(last, next), describe(next, last), dataOrder(last, next), nearestRestart(last)].filter(Boolean).join('; ')}`
        }
        const stepped = wallStep(last, next)
        if (stepped) {
          nearWallSteps += 1
          line += `; ${stepped}`
        }
        if (acrossRestart) acrossRestarts += 1
        if (acrossRestart && excuseRestarts) excused += 1
        else if (expiredAndTold(last, next) || expiredAndTold(next, last)) {
          expiredOverlaps += 1
          excused += 1
          if (expired.length < 20) expired.push(line)
        } else {
          if (!acrossRestart) overlaps += 1
          if (failures.length < 10) failures.push(line)
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
    expiredOverlaps,
    overlapsNearWallSteps: nearWallSteps,
    expired,
    verdicts,
    failures,
  }
}

module.exports = { Sections, checkSections, judgeSections }
