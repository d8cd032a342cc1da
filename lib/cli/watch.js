'use strict'

// `watch`: the locks matching a pattern, redrawn in place every interval, with the
// acquisitions per second each made (read from its fence counter), and the hand-overs and
// wake-ups per second our processes counted for it (asked each frame, watch-answers.js; a
// wake-up announced on the lock's channel, as earlier versions are told, is heard there),
// the most contended first.

const native = require('../native')
const { connect } = require('./connect')
const { listLocks, rereadCounters, readMissed } = require('./locks')
const { ReplyError } = require('./resp')
const { ProcessCounts, ASK_EVERY_MS } = require('./watch-answers')

/** Counts wake-ups per lock key, heard on the lock channels (sharded and plain pub/sub). */
class WakeCounter {
  constructor(subscriber, answers) {
    this.subscriber = subscriber
    this.counts = new Map()
    this.sharded = new Set()
    this.shardedRefused = false
    subscriber.onPush = (push) => {
      // ['smessage'|'message', channel, payload] or ['pmessage', pattern, channel, payload]
      const kind = push[0].toString()
      const channel = kind === 'pmessage' ? push[2] : push[1]
      if (kind === 'message' && answers.hear(channel, push[2])) return
      const key = native.lockKeyOfChannel(channel)
      if (!key) return
      // A cluster moved the slot: subscribed again, on its new master, at the next refresh.
      if (kind === 'sunsubscribe') this.sharded.delete(key.toString('utf8'))
      else this.add(key.toString('utf8'))
    }
  }

  add(key) {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1)
  }

  /**
   * Plain pub/sub (Redis before 7) publishes on every lock's channel: one pattern hears all.
   * A cluster's locks announce by SPUBLISH only, and patterns do not exist for those.
   */
  async start() {
    if (this.subscriber.masters) return
    try {
      await this.subscriber.call('PSUBSCRIBE', '*released*')
    } catch (err) {
      // An ACL without these channels: the wakes come from our processes' answers alone.
      if (!(err instanceof ReplyError)) throw err
    }
  }

  /**
   * Redis 7 announces with SPUBLISH, heard only by a subscriber of that very channel (on a
   * cluster, on the master of its slot: the subscriber routes it there).
   */
  async follow(keys) {
    if (this.shardedRefused) return
    for (const key of keys) {
      if (this.sharded.has(key)) continue
      this.sharded.add(key)
      try {
        await this.subscriber.call('SSUBSCRIBE', native.lockSiblings(Buffer.from(key, 'utf8')).channel)
      } catch (err) {
        // One server refusing it is older than Redis 7; a cluster's refusal is for this key
        // (its slot on the move), which is tried again at the next refresh.
        if (this.subscriber.masters && (err instanceof ReplyError || err.transient)) {
          this.sharded.delete(key)
          continue
        }
        if (!(err instanceof ReplyError)) throw err
        this.shardedRefused = true
        return
      }
    }
  }

  take() {
    const counts = this.counts
    this.counts = new Map()
    return counts
  }
}

// Fences each grant across processes draws (release_grant.lua BLOCK): a block, of which the
// grantee uses one (the client passes no block on, release.rs `last: 0`).
const GRANT_BLOCK = 1024

// How long after reading the counters their counts of fences drawn in vain are read: a
// process counts a draw in vain as it reads the reply, a round trip after the draw, so a
// count read this much later holds every draw in vain the counter held. One it holds ahead
// of the counter is owed to the next refresh; only a process whose loop took longer than
// this to read its reply can still show one acquisition too many for one refresh.
const MISSED_LAG_MS = 50

/**
 * Acquisitions per second of `lock` from its fence counter, whose last reading per key is
 * kept in `last` (`{ counter, missed, owed, at, ringed }`). Every acquisition draws from the
 * counter: syncguard one fence, our APIs two (the holder's and one kept for a hand-over,
 * which then draws one: a lock handed over within one process reads as half its rate at
 * most), and a grant across processes a block of GRANT_BLOCK. A failed attempt draws none,
 * but for a process's first attempt at a lock it has not found held within a minute: that
 * one goes as the transaction, which draws two whatever it finds (ops/kept_fences.rs), and
 * counts them beside the counter (`missed`, read MISSED_LAG_MS after it), so the growth
 * less the count's is the acquisitions'. A count read ahead of its draws (`owed`) is taken
 * from the next growth. While the lock has a ring of connections taking it by grant (now or
 * at the last reading), the growth is read as whole blocks, one a grant, and the rest as
 * attempts' pairs: right while fewer than 512 plain acquisitions come between two refreshes.
 * A counter that went back (deleted, expired) starts anew; a count that went back (expired
 * after ten minutes unchanged) counts from 0.
 */
function acquisitionsPerSec(lock, missed, last, now) {
  const counter = lock.fenceCounter === null ? null : Number(lock.fenceCounter)
  const ringed = lock.counters?.ringed > 0
  const before = last.get(lock.key)
  const reading = { counter, missed, owed: 0, at: now, ringed }
  last.set(lock.key, reading)
  if (counter === null || before === undefined || before.counter === null || counter < before.counter) return 0
  const vain = missed >= before.missed ? missed - before.missed : missed
  let grown = counter - before.counter - vain - before.owed
  if (grown < 0) {
    reading.owed = -grown
    grown = 0
  }
  let acquisitions
  if (lock.api === 'syncguard') acquisitions = grown
  else if (ringed || before.ringed) {
    const grants = Math.floor(grown / GRANT_BLOCK)
    acquisitions = grants + (grown - grants * GRANT_BLOCK) / 2
  } else acquisitions = grown / 2
  return round(acquisitions / (Math.max(now - before.at, 1) / 1000))
}

/**
 * One refresh: each lock with its rates over the last `seconds`. Wake-ups are those our
 * processes counted, or those heard on the lock's channel where more (earlier versions, told
 * there, do not answer; a waiter of ours told there is in both).
 */
function frame(locks, missed, heard, counted, lastCounters, seconds, now) {
  const rows = locks.map((lock, i) => {
    const own = counted?.get(lock.key) ?? { handOvers: 0, wakes: 0 }
    return {
      key: lock.key,
      api: lock.api,
      holder: lock.holder,
      ttlMs: lock.ttlMs,
      waiters: lock.waiters,
      acquisitionsPerSec: acquisitionsPerSec(lock, missed[i], lastCounters, now),
      // null (shown -) when the server's ACL keeps the watch from asking our processes.
      handOversPerSec: counted ? round(own.handOvers / seconds) : null,
      wakesPerSec: counted ? round(Math.max(own.wakes, heard.get(lock.key) ?? 0) / seconds) : null,
    }
  })
  const contention = (r) => (r.handOversPerSec ?? 0) + r.waiters + (r.wakesPerSec ?? 0)
  return rows.sort((a, b) => contention(b) - contention(a) || b.acquisitionsPerSec - a.acquisitionsPerSec ||
    a.key.localeCompare(b.key))
}

function round(n) {
  return Math.round(n * 10) / 10
}

function table(rows, header) {
  const cols = ['key', 'api', 'holder', 'ttlMs', 'waiters', 'acquisitions/s', 'hand-overs/s', 'wakes/s']
  const cells = rows.map((r) => [r.key, r.api, r.holder ?? '-', r.ttlMs ?? '-', r.waiters, r.acquisitionsPerSec, r.handOversPerSec ?? '-', r.wakesPerSec ?? '-'].map(String))
  const widths = cols.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)))
  const line = (row) => row.map((cell, i) => cell.padEnd(widths[i])).join('  ').trimEnd()
  return [header, '', line(cols), ...cells.map(line)]
}

/**
 * Waits `ms` between frames, or until `stopped` (then true). A process stops counting a few
 * seconds after the last request, so a slow watch asks again meanwhile (`keepAsking`), here
 * and not beside the frame: a frame's commands on a cluster (ASKING, then the command it
 * admits) must not have a request come between them.
 */
async function rest(ms, stopped, keepAsking) {
  const until = Date.now() + ms
  for (;;) {
    const left = until - Date.now()
    if (left <= 0) return false
    let timer
    const nap = new Promise((resolve) => { timer = setTimeout(resolve, Math.min(left, ASK_EVERY_MS)) })
    const ended = await Promise.race([nap.then(() => false), stopped.then(() => true)])
    clearTimeout(timer)
    if (ended) return true
    if (Date.now() < until) await keepAsking().catch(() => {})
  }
}

/**
 * Runs until q, Ctrl-C, SIGTERM or `count` refreshes. A terminal gets the alternate screen,
 * redrawn in place, and gets its own screen and cursor back on the way out.
 */
async function watch({ address, pattern, intervalMs, count, json, out, err, input, timeoutMs }) {
  const client = await connect(address, { timeoutMs })
  let subscriber
  let wakes
  let answers
  try {
    // On a cluster, one connection per master, opened as the watched keys need them.
    subscriber = client.subscriber ? client.subscriber() : await connect(address, { timeoutMs })
    answers = new ProcessCounts(subscriber, pattern, (text) => err.write(`native-redis-lock: ${text}\n`))
    wakes = new WakeCounter(subscriber, answers)
    await answers.start()
    await wakes.start()
  } catch (err) {
    // An open connection would keep the process from ending.
    client.close()
    subscriber?.close()
    throw err
  }
  const tty = !json && out.isTTY
  const lastCounters = new Map()
  const seen = new Map()
  let stop
  const stopped = new Promise((resolve) => { stop = resolve })
  const restore = []
  if (tty) {
    out.write('\x1b[?1049h\x1b[?25l')
    restore.push(() => out.write('\x1b[?25h\x1b[?1049l'))
  }
  if (input.isTTY) {
    input.setRawMode(true)
    input.resume()
    const onKey = (data) => {
      if (data.includes(0x71) || data.includes(0x03)) stop() // q, Ctrl-C
    }
    input.on('data', onKey)
    restore.push(() => {
      input.off('data', onKey)
      input.setRawMode(false)
      input.pause()
    })
  }
  const onSignal = () => stop()
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  restore.push(() => {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  })
  let failure = null
  client.onClose = subscriber.onClose = (err) => {
    failure = err
    stop()
  }
  try {
    let last = Date.now()
    for (let n = 0; count === undefined || n < count; n++) {
      if (await rest(n === 0 ? 0 : intervalMs, stopped, () => answers.keepAsking(client))) break
      // Answered while the locks are read: the answers heard by the end of the frame count.
      await answers.ask(client)
      const locks = await listLocks(client, pattern)
      // A lock held in an earlier frame keeps its row while free: a busy lock often is, at
      // the instant SCAN passes.
      const held = new Set(locks.map((lock) => lock.key))
      for (const lock of locks) seen.set(lock.key, lock)
      for (const [key, lock] of seen) if (!held.has(key)) locks.push(await rereadCounters(client, lock))
      await wakes.follow(locks.map((lock) => lock.key))
      await new Promise((resolve) => setTimeout(resolve, MISSED_LAG_MS))
      const missed = await readMissed(client, locks)
      const now = Date.now()
      const counted = answers.refused ? null : answers.take()
      const rows = frame(locks, missed, wakes.take(), counted, lastCounters, Math.max(now - last, 1) / 1000, now)
      last = now
      if (json) {
        out.write(`${JSON.stringify({ at: new Date(now).toISOString(), pattern, locks: rows })}\n`)
      } else {
        const header = `native-redis-lock watch ${address.shown} ${pattern}  ${new Date(now).toISOString()}  (q quits)`
        const lines = table(rows, header)
        // Home, each line cleared to its end, then whatever the last frame left below.
        if (tty) out.write(`\x1b[H${lines.map((l) => `${l}\x1b[K`).join('\n')}\n\x1b[J`)
        else out.write(`${lines.join('\n')}\n\n`)
      }
    }
  } finally {
    for (const undo of restore.reverse()) undo()
    client.close()
    subscriber.close()
  }
  if (failure) throw failure
}

module.exports = { watch }
