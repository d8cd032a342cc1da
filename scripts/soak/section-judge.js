'use strict'

// The judge of the soak's sections (scripts/soak/sections.js writes and reads them): per
// counter key, its sections in order of grant, each checked against the one before it that
// ended last. It keeps only that one and the counts, so the close can feed it a key's sections
// a chunk at a time, however long the run (checkSections), or all at once (judgeSections).

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
 * The failures in sections fed a key at a time: `beginKey(counterKey)`, the key's sections in
 * order of grant (ties in the order of their records) to `add`, then `endKey(counter)`; each
 * section's verdict to `verdict` with its record's place in the list, in any order. A counter
 * other than the number of SETs recorded on it (an update lost to a second holder), and two
 * sections of one key overlapping in time (grant to reply), which counts for sections in doubt
 * too, fail; but an overlap where one holder's lease had ended by its own account before the
 * other's grant, and the library told that holder, is the lock working as documented: counted
 * and listed (`expired`), not failed.
 */
class SectionJudge {
  constructor({ restarts = [], excuseRestarts = false, wallSteps = [] } = {}) {
    this.restarts = restarts
    this.excuseRestarts = excuseRestarts
    this.wallSteps = wallSteps
    // verdict name -> [count, place of the first record with it]: the JSON lists them as the
    // records first met them.
    this.verdicts = new Map()
    this.failures = []
    this.expired = []
    this.keys = 0
    this.overlaps = 0
    this.acrossRestarts = 0
    // Of those, the ones failed (no --excuse-restarts: the quarantine's guarantee broken, or
    // strict rules) and the ones counted as a stalled holder's (expired and told).
    this.failedAcrossRestarts = 0
    this.expiredAcrossRestarts = 0
    this.expiredOverlaps = 0
    this.nearWallSteps = 0
  }

  // A section whose hold spans a SIGKILL of the lock server went in doubt. The library tells
  // its holder at the close (onSuspended, `suspended`; isHeld and `acquired` false), and the
  // traffic notes the section in doubt when its hold says so at the end or its release fails,
  // but no section asks before its SET (it writes as a holder that ignores the doubt would,
  // with no fence), and Redis restarted empty lets a contender take the key meanwhile. With
  // `excuseRestarts`, such overlaps and the updates they lost are counted, not failed.
  // A hold begins when Redis records it, which can be before the section (`heldSince`): a kill
  // between the two empties the store under a holder that has not written yet.
  spansRestart(section) {
    return this.restarts.some((at) => Math.min(section.start, section.heldSince ?? Infinity) <= at && at <= section.end)
  }

  // How far the kill nearest to the first's grant was, for the overlap's line: the evidence
  // whether a restart explains it.
  nearestRestart(section) {
    if (this.restarts.length === 0) return undefined
    const at = this.restarts.reduce((best, r) => (Math.abs(r - section.start) < Math.abs(best - section.start) ? r : best))
    const gap = section.start - at
    return `nearest kill of the lock server ${Math.abs(gap).toFixed(1)} ms ${gap >= 0 ? 'before' : 'after'} the first's grant`
  }

  // A step forward of the wall clock while the first held, before the second's grant: Redis
  // ended the first's lease that much early, its holder counting on the monotonic clock and
  // told at its next refresh (README, restart quarantine, "Not guaranteed"). Named on the
  // overlap's line and counted; not excused.
  wallStep(first, second) {
    const from = Math.min(first.start, first.heldSince ?? Infinity)
    const step = this.wallSteps.filter((s) => s.ms > 0 && from <= s.at && s.at <= second.start).sort((a, b) => b.ms - a.ms)[0]
    return step && `the wall clock stepped +${step.ms.toFixed(1)} ms ${(second.start - step.at).toFixed(1)} ms before the second's grant`
  }

  /** Counts `section`'s verdict (by API), a check that the verdicts are read; `place`: its record's index. */
  verdict(section, place) {
    if (section.api === undefined) return
    const name = `${section.api} ${section.told ?? 'none'}`
    const counted = this.verdicts.get(name)
    if (counted === undefined) this.verdicts.set(name, [1, place])
    else {
      counted[0] += 1
      counted[1] = Math.min(counted[1], place)
    }
  }

  beginKey(counterKey) {
    this.keys += 1
    this.counterKey = counterKey
    this.count = 0
    this.excused = 0
    // The section before the next that ended last: the only one a later grant can overlap
    // that the sweep looks at.
    this.last = undefined
  }

  add(next) {
    this.count += 1
    const last = this.last
    if (last === undefined) {
      this.last = next
      return
    }
    if (next.start < last.end) {
      const acrossRestart = this.spansRestart(last)
      const stepped = this.wallStep(last, next)
      if (stepped) this.nearWallSteps += 1
      if (acrossRestart) this.acrossRestarts += 1
      // Written only for the overlaps listed: a run can have many more.
      const line = () => {
        const kind = `${last.doubt || next.doubt ? 'in doubt' : 'clean'}${acrossRestart ? ', the first across a restart' : ''}`
        let text = `${this.counterKey}: sections ${last.id} and ${next.id} (${kind}) overlap by ${(last.end - next.start).toFixed(2)} ms`
        if (last.api !== undefined || next.api !== undefined) {
          text += `; ${[describe(last, next), describe(next, last), dataOrder(last, next), this.nearestRestart(last)].filter(Boolean).join('; ')}`
        }
        return stepped ? `${text}; ${stepped}` : text
      }
      if (acrossRestart && this.excuseRestarts) this.excused += 1
      else if (expiredAndTold(last, next) || expiredAndTold(next, last)) {
        this.expiredOverlaps += 1
        if (acrossRestart) this.expiredAcrossRestarts += 1
        this.excused += 1
        if (this.expired.length < 20) this.expired.push(line())
      } else {
        if (!acrossRestart) this.overlaps += 1
        else this.failedAcrossRestarts += 1
        if (this.failures.length < 10) this.failures.push(line())
      }
    }
    if (next.end > last.end) this.last = next
  }

  /** `counter`: the key's counter as the data server has it. */
  endKey(counter) {
    // Each overlap can lose at most one update; only excused overlaps may explain a shortfall.
    if (counter > this.count || counter < this.count - this.excused) {
      this.failures.push(`${this.counterKey}: counter ${counter}, sections ${this.count}`)
    }
    this.last = undefined
  }

  /** The judgement; `sections`: how many records were read, `inDoubt`: the ids noted in doubt. */
  result({ sections, inDoubt }) {
    const verdicts = {}
    for (const [name, [count]] of [...this.verdicts].sort((a, b) => a[1][1] - b[1][1])) verdicts[name] = count
    return {
      sections,
      inDoubt,
      counters: this.keys,
      overlaps: this.overlaps,
      overlapsAcrossRestarts: this.acrossRestarts,
      failedAcrossRestarts: this.failedAcrossRestarts,
      expiredAcrossRestarts: this.expiredAcrossRestarts,
      expiredOverlaps: this.expiredOverlaps,
      overlapsNearWallSteps: this.nearWallSteps,
      expired: this.expired,
      verdicts,
      failures: this.failures,
    }
  }
}

/**
 * The failures in what was read back, all of it in memory (see SectionJudge): `records`
 * ('counterKey|grantAt|sentAt|id[|readAt]' lines), `ends` (id -> clock() after the SET's
 * reply), `doubt` (ids), `counters` (counterKey -> value), and where the soak noted them
 * `leases` (id -> 'writeAt|expiresAt|api|heldSince'), `told` (id -> the library's verdict)
 * and `notes`.
 */
function judgeSections({ records, ends, doubt: doubtIds, counters, leases = {}, told = {}, notes = {} }, options = {}) {
  const judge = new SectionJudge(options)
  const doubt = new Set(doubtIds)
  const byCounter = new Map()
  records.forEach((line, place) => {
    const section = sectionOf(line, ends, doubt, leases, told, notes)
    judge.verdict(section, place)
    if (!byCounter.has(section.counterKey)) byCounter.set(section.counterKey, [])
    byCounter.get(section.counterKey).push(section)
  })
  for (const [counterKey, sections] of byCounter) {
    judge.beginKey(counterKey)
    // Array.prototype.sort is stable: sections granted at the same time stay in record order.
    for (const section of sections.sort((a, b) => a.start - b.start)) judge.add(section)
    judge.endKey(counters[counterKey] ?? 0)
  }
  return judge.result({ sections: records.length, inDoubt: doubt.size })
}

module.exports = { SectionJudge, judgeSections, sectionOf }
