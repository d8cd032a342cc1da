'use strict'

// Hand-overs and wakes per key, as our processes count them (issue 27): each frame `watch`
// publishes a request on the control channel a connection of this version subscribes to with
// its first waiter (src/core/proto/watch.rs), and each connection that heard it answers on this
// watch's own reply channel with its server's totals per key since it began counting (a
// `session`; `process` names the connection's store). A process counts only while asked, and
// stops a few seconds after the last request.

const crypto = require('node:crypto')
const native = require('../native')
const { ReplyError } = require('./resp')

// A process forgets its counts this long after the last request: a slower watch asks between
// its frames too.
const ASK_EVERY_MS = 2000
// A process that stopped answering (ended) is forgotten after this long.
const FORGET_MS = 10_000

/** Whether `err` is the server's refusal of a channel or command by its ACL. */
function denied(err) {
  return err instanceof ReplyError && /^NOPERM\b/.test(err.message)
}

class ProcessCounts {
  /** `warn(text)` is told once if the server's ACL keeps this watch from asking. */
  constructor(subscriber, pattern, warn) {
    this.subscriber = subscriber
    this.warn = warn
    // Set when the ACL refuses the reply channel or the request: the watch goes on without.
    this.refused = false
    this.pattern = pattern === '*' ? '' : pattern
    this.channel = native.watchChannel()
    this.replyTo = `native-redis-lock:watch:reply:${crypto.randomBytes(12).toString('hex')}`
    this.asked = 0
    // Per process: its latest answer and the totals the last frame counted from.
    this.processes = new Map()
  }

  /** Subscribes to the reply channel; `hear(channel, payload)` is handed every message. */
  async start() {
    await this.refusable(() => this.subscriber.call('SUBSCRIBE', this.replyTo))
  }

  /** Runs `command`; an ACL's refusal stops the asking (said once), any other error is thrown. */
  async refusable(command) {
    if (this.refused) return
    try {
      await command()
    } catch (err) {
      if (!denied(err)) throw err
      this.refused = true
      this.warn(`hand-overs/s and wakes/s not shown: the server's ACL refuses this user's request to the processes (${err.message})`)
    }
  }

  /** Whether `channel` is this watch's reply channel (the answer then read). */
  hear(channel, payload) {
    if (channel.toString('utf8') !== this.replyTo) return false
    let answer
    try {
      answer = JSON.parse(payload.toString('utf8'))
    } catch {
      return true
    }
    if (answer?.v !== 1 || typeof answer.process !== 'string' || !Array.isArray(answer.keys)) return true
    const known = this.processes.get(answer.process)
    const totals = new Map()
    for (const entry of answer.keys) {
      if (Array.isArray(entry) && typeof entry[0] === 'string') totals.set(entry[0], { handOvers: Number(entry[1]) || 0, wakes: Number(entry[2]) || 0 })
    }
    const latest = { session: answer.session, totals, at: Date.now() }
    // A session first heard of counts from its first answer: earlier totals may be another
    // watch's.
    if (!known || known.latest.session !== latest.session) this.processes.set(answer.process, { latest, used: latest })
    else known.latest = latest
    return true
  }

  /** Publishes a request (one line each: version, id, reply channel, pattern). */
  async ask(client) {
    if (this.refused) return
    this.asked = Date.now()
    const id = crypto.randomBytes(8).toString('hex')
    await this.refusable(() => client.call('PUBLISH', this.channel, `1\n${id}\n${this.replyTo}\n${this.pattern}`))
  }

  /**
   * Asks again if the last request is getting old (a watch slower than a process's patience):
   * called from the frame loop only, between frames, so it never comes between two commands
   * of a frame (a cluster's ASKING and the command it admits).
   */
  async keepAsking(client) {
    if (Date.now() - this.asked >= ASK_EVERY_MS) await this.ask(client)
  }

  /**
   * Per key, the hand-overs and wakes counted since the last frame, summed over processes.
   * Within a session a key absent from an answer was not counted yet: a process's map only
   * grows while it counts.
   */
  take() {
    const sums = new Map()
    const now = Date.now()
    for (const [process, counts] of this.processes) {
      if (now - counts.latest.at > FORGET_MS) {
        this.processes.delete(process)
        continue
      }
      for (const [key, total] of counts.latest.totals) {
        const before = counts.used.totals.get(key) ?? { handOvers: 0, wakes: 0 }
        const sum = sums.get(key) ?? { handOvers: 0, wakes: 0 }
        sum.handOvers += Math.max(total.handOvers - before.handOvers, 0)
        sum.wakes += Math.max(total.wakes - before.wakes, 0)
        sums.set(key, sum)
      }
      counts.used = counts.latest
    }
    return sums
  }
}

module.exports = { ProcessCounts, ASK_EVERY_MS }
