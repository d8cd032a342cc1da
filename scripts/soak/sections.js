'use strict'

// Critical sections: GET then SET a counter on the data server (never restarted), so two
// holders at once lose an update. Each SET is written in one MULTI with its record (counter
// key, grant time, send time, id, and the data server's TIME at the GET): a process SIGKILLed
// mid-section leaves both or neither. The end (after the reply), the data server's TIME at the
// SET, the lease's expiry as the holder knew it at the end, the library's verdict after the
// section and a hold that went in doubt are noted apart.
const { randomBytes } = require('node:crypto')
const { clock, clockOfEpoch, RUN } = require('./tally')
const { SectionJudge, judgeSections, sectionOf } = require('./section-judge')

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

// How many records the close reads at a time, and so about how many sections it holds. Read
// whole (the list, four hashes and the doubt set, then an object a section), a 20-30-minute
// soak's took the parent's RSS to 1.2-2.1 GB, and 1,000,000 synthetic sections to 1.23 GB.
const CHUNK = 1000
// Sorted by grant on the data server for the close, a set a counter key, deleted once judged.
const BY_GRANT = 'soak:check'
// A record's place in the list, zero-padded ahead of its line in the sorted set: sections
// granted at the same time then sort in record order, as the stable sort of judgeSections keeps them.
const PLACE_DIGITS = 15

/**
 * Reads every section and counter back, and answers the failures (see SectionJudge in
 * scripts/soak/section-judge.js), holding `options.chunk` sections at a time: the records go,
 * a chunk at a time, into a sorted set per counter key on the data server, scored by grant
 * time; then each key's are read back in that order with what the soak noted of them, and
 * judged as they come. `restarts`: the clock() times the lock server was SIGKILLed;
 * `wallSteps`: the wall clock's steps against clock() (scripts/soak/wall-clock.js).
 */
async function checkSections(data, options = {}) {
  const chunk = options.chunk ?? CHUNK
  const judge = new SectionJudge(options)
  const run = `${BY_GRANT}:${randomBytes(4).toString('hex')}`
  // counterKey -> its sorted set, in the order of the key's first record.
  const byGrant = new Map()
  let sections = 0
  try {
    for (;;) {
      // Taken off the list as they are copied: the data server holds each record once, not
      // twice, at the close of a long run.
      const lines = (await data.lpop(RECORDS, chunk)) ?? []
      const adds = new Map()
      for (const line of lines) {
        const [counterKey, grantAt] = line.split('|')
        const start = Number(grantAt)
        if (Number.isNaN(start)) throw new Error(`soak: section record ${sections} has no grant time: ${line}`)
        if (!byGrant.has(counterKey)) byGrant.set(counterKey, `${run}:${byGrant.size}`)
        const key = byGrant.get(counterKey)
        if (!adds.has(key)) adds.set(key, [])
        adds.get(key).push(start, `${String(sections).padStart(PLACE_DIGITS, '0')}|${line}`)
        sections += 1
      }
      if (adds.size) await replies(adds, (batch, [key, args]) => batch.zadd(key, ...args), data)
      if (lines.length < chunk) break
    }
    for (const [counterKey, key] of byGrant) {
      judge.beginKey(counterKey)
      for (let from = 0; ; from += chunk) {
        const members = await data.zrange(key, from, from + chunk - 1)
        if (members.length === 0) break
        for (const [place, section] of await sectionsOf(data, members)) {
          judge.verdict(section, place)
          judge.add(section)
        }
        if (members.length < chunk) break
      }
      judge.endKey(Number((await data.get(counterKey)) ?? 0))
      await data.unlink(key)
      byGrant.delete(counterKey)
    }
  } finally {
    // Left by a check that failed part way: the error that stopped it is the one to see, not
    // a failed clean-up's on a server the soak is about to stop.
    if (byGrant.size) await data.unlink(...byGrant.values()).catch(() => undefined)
  }
  return judge.result({ sections, inDoubt: await data.scard(DOUBT) })
}

/** Runs `add(batch, item)` for each of `items` in one pipeline; answers the replies, or throws the first error. */
async function replies(items, add, data) {
  const batch = data.pipeline()
  for (const item of items) add(batch, item)
  const out = []
  for (const [err, reply] of await batch.exec()) {
    if (err) throw err
    out.push(reply)
  }
  return out
}

/** [place, section] for members of a sorted set of checkSections, with what the soak noted of each. */
async function sectionsOf(data, members) {
  const rows = members.map((member) => {
    const bar = member.indexOf('|')
    const line = member.slice(bar + 1)
    return { place: Number(member.slice(0, bar)), line, id: line.split('|')[3] }
  })
  const ids = rows.map((row) => row.id)
  const tables = [ENDS, LEASES, TOLD, NOTES]
  const [ends, leases, told, notes, inDoubt] = await replies([...tables, DOUBT], (batch, key) => (key === DOUBT ? batch.smismember(key, ...ids) : batch.hmget(key, ...ids)), data)
  // As hgetall would have had them: only the ids with a value.
  const byId = (values) => {
    const table = {}
    values.forEach((value, i) => {
      if (value !== null) table[ids[i]] = value
    })
    return table
  }
  const doubt = new Set(ids.filter((_, i) => inDoubt[i] === 1))
  const [endsOf, leasesOf, toldOf, notesOf] = [ends, leases, told, notes].map(byId)
  return rows.map((row) => [row.place, sectionOf(row.line, endsOf, doubt, leasesOf, toldOf, notesOf)])
}

module.exports = { Sections, checkSections, judgeSections }
