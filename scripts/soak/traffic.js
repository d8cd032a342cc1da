'use strict'

// The soak's traffic in one process, on one backend: actors looping over every API's
// operations (acquire, tryAcquire, waits with short timeouts, waits granted across processes
// (crossProcessGrants), auto-refreshed holds with extend, `using`, aborts mid-wait and at
// grant time, ExclusiveLock, maestro's service, syncguard's createLock / lock(fn) / backend /
// lookup / owns). Refusals and connection
// errors are counted by code; each call runs under a deadline (Tally.watch).
const Redis = require('ioredis')
const { DistributedLock, ExclusiveLock, DistributedLockService } = require('../..')
const syncguard = require('../../syncguard')
const { clock, clockOfEpoch } = require('./tally')

const KEYS = ['k0', 'k1', 'k2']
// Our calls' own bounds (connect + command) when we set them, and the defaults when the
// original API has no such option (ExclusiveLock, maestro).
const OURS_MS = 2000
const DEFAULT_MS = 10000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const rand = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo + 1))
const pick = (list) => list[Math.floor(Math.random() * list.length)]

class Traffic {
  /**
   * `backend`: { name, url, space, quarantineMs } (space names the counters: one per memory://
   * process; quarantineMs, the restart quarantine every lock on it is made with).
   */
  constructor(backend, tally, sections) {
    this.backend = backend
    this.tally = tally
    this.sections = sections
    this.stopping = false
    // Only where the server restarts: memory:// accepts the option, but its store never does.
    this.quarantine = backend.quarantineMs ? { restartQuarantineMs: backend.quarantineMs } : {}
    const options = { connectTimeoutMs: 1000, commandTimeoutMs: 1000, retryDelayMs: 20, maxRetries: 2, ...this.quarantine }
    this.dl = new DistributedLock(backend.url, options)
    // On the same keys as `dl`: a release by either hands the lock to a waiting process of
    // this one (README "Grants across processes"), the sections showing one holder at a time.
    this.grants = new DistributedLock(backend.url, { ...options, crossProcessGrants: true })
    // syncguard's lock(fn) swallows a release that finds the lock not ours: its events tell
    // the soak which fence each acquisition won and which lockIds a release did delete.
    this.sgFences = new Map()
    this.sgReleased = new Set()
    const onEvent = (event) => {
      if (event.type === 'acquired' && event.key !== undefined) this.sgFences.set(event.key, event.fence)
      if (event.type !== 'released' || event.lockId === undefined) return
      // Checked and dropped at each lock(fn)'s end; a bound for those never checked (sg.backend's).
      if (this.sgReleased.size > 1000) this.sgReleased.clear()
      this.sgReleased.add(event.lockId)
    }
    this.sgBackend = syncguard.createRedisBackend(backend.url, { commandTimeoutMs: 1000, onEvent, ...this.quarantine })
    this.sgLock = syncguard.createLock(backend.url, { commandTimeoutMs: 1000, onEvent, ...this.quarantine })
    this.exclusives = []
    this.services = []
    // Asks the lock server, as a `using` section ends, who holds its key: the evidence, should
    // two sections overlap, of whether the key was still the holder's. Never retried or queued;
    // reconnected every 20 ms after a restart (ioredis's default waits up to 2 s, and the probe
    // answered 'not asked' just where a restart makes it matter).
    this.probe =
      backend.name === 'redis'
        ? new Redis(backend.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: 500, lazyConnect: true, retryStrategy: () => 20 })
        : null
    this.probe?.on('error', () => {})
  }

  /** Who holds `key` on the lock server now, against `token`: a note for the section's line. */
  async lockHolder(key, token) {
    if (this.probe === null) return undefined
    try {
      if (this.probe.status === 'wait') await this.probe.connect()
      const [[, holder], [, pttl]] = await this.probe.multi().get(`lock:${key}`).pttl(`lock:${key}`).exec()
      const who = holder === null ? 'nobody' : holder === token ? 'this hold' : `token ${String(holder).slice(0, 8)}`
      return `at its end (${clock().toFixed(1)}) the lock server had ${who} on the key, pttl ${pttl}`
    } catch (err) {
      return `lock server not asked (${err.message})`
    }
  }

  counter(api, key) {
    return `soak:count:${this.backend.space}:${api}:${key}`
  }

  watch(kind, boundMs, promise) {
    return this.tally.watch(`${this.backend.name}.${kind}`, boundMs, promise)
  }

  /** Releases `handle`; answers true when that failed (the hold is then in doubt). */
  async release(handle) {
    try {
      await this.watch('dl.release', OURS_MS, handle.release())
      return false
    } catch (err) {
      this.tally.error(err)
      return true
    }
  }

  ops() {
    const key = pick(KEYS)
    return {
      'dl.acquire': async () => {
        const calledAt = clock()
        const handle = await this.watch('dl.acquire', 3 * OURS_MS + 100, this.dl.acquire(key, 2000))
        await this.hold('dl', key, handle, calledAt)
      },
      'dl.tryAcquire': async () => {
        const calledAt = clock()
        const handle = await this.watch('dl.tryAcquire', OURS_MS, this.dl.tryAcquire(key, 2000))
        if (!handle) this.tally.passes += 1
        else await this.hold('dl', key, handle, calledAt)
      },
      'dl.waitForLock': async () => {
        const timeout = rand(50, 200)
        const calledAt = clock()
        const handle = await this.watch('dl.waitForLock', timeout + OURS_MS, this.dl.waitForLock(key, timeout, 2000))
        await this.hold('dl', key, handle, calledAt)
      },
      'dl.grants': async () => {
        const timeout = rand(50, 300)
        const calledAt = clock()
        const handle = await this.watch('dl.grants', timeout + OURS_MS, this.grants.waitForLock(key, timeout, 2000))
        await this.hold('dl', key, handle, calledAt, undefined, 'grants')
      },
      'dl.autoRefresh': async () => {
        const calledAt = clock()
        const handle = await this.watch(
          'dl.autoRefresh',
          3 * OURS_MS + 100,
          this.dl.acquire(key, 900, { autoRefresh: true, onLost: () => (this.tally.lost += 1) }),
        )
        await this.hold('dl', key, handle, calledAt, async () => {
          await sleep(rand(300, 1200))
          if (Math.random() < 0.5) await this.watch('dl.extend', OURS_MS, handle.extend(500))
        })
      },
      'dl.using': async () => {
        let aborted = false
        let id
        let told = []
        // The hold begins no earlier (see hold()).
        const calledAt = clock()
        const using = this.watch(
          'dl.using',
          300 + 2 * OURS_MS,
          this.dl.using(
            key,
            async (handle, signal) => {
              const grantAt = clock()
              const atGrant = this.holdNote(handle, grantAt)
              let lostAt
              signal.addEventListener('abort', () => (lostAt = `told lost at ${clock().toFixed(1)} (${signal.reason?.message})`))
              id = await this.sections.run(this.counter('dl', key), grantAt, 'dl.using', () => clockOfEpoch(handle.info.expiresAt), calledAt)
              told = this.heldWords(handle)
              const atEnd = await this.lockHolder(key, handle.info.token)
              const noted = () => this.sections.note(id, [atGrant, atEnd, lostAt].filter(Boolean).join(', '))
              signal.addEventListener('abort', () => noted().catch(() => {}))
              await noted()
              this.tally.grants += 1
              await sleep(rand(0, 400))
              aborted = signal.aborted || !handle.isHeld
              if (signal.aborted) told.push('aborted')
              if (!handle.isHeld && !told.includes('notHeld')) told.push('notHeld')
              if (aborted) await this.sections.doubt(id)
            },
            { timeoutMs: 300, ttlMs: 900, autoRefresh: true },
          ),
        )
        try {
          await using
        } catch (err) {
          if (id) told.push('failed')
          throw err
        } finally {
          if (id) await this.sections.told(id, told)
        }
        if (aborted) this.tally.bump(this.tally.ops, `${this.backend.name}.inDoubt`)
      },
      'dl.abortWait': async () => {
        const signal = AbortSignal.timeout(rand(5, 60))
        const calledAt = clock()
        const handle = await this.watch('dl.abortWait', 500 + OURS_MS, this.dl.waitForLock(key, 500, 2000, { signal }))
        await this.hold('dl', key, handle, calledAt)
      },
      'dl.abortAtGrant': async () => {
        const calledAt = clock()
        const first = await this.watch('dl.tryAcquire', OURS_MS, this.dl.tryAcquire(key, 2000))
        if (!first) {
          this.tally.passes += 1
          return
        }
        this.tally.grants += 1
        const grantAt = clock()
        const atGrant = this.holdNote(first, grantAt)
        const id = await this.sections.run(this.counter('dl', key), grantAt, 'dl.abortAtGrant', () => clockOfEpoch(first.info.expiresAt), calledAt)
        await this.sections.note(id, atGrant)
        const told = this.heldWords(first)
        const controller = new AbortController()
        const waitCalledAt = clock()
        const waiting = this.watch('dl.abortAtGrant', 1000 + OURS_MS, this.dl.waitForLock(key, 1000, 2000, { signal: controller.signal }))
        waiting.catch(() => {})
        await sleep(rand(1, 10))
        // The release hands the lock to the waiter as the abort lands: either may win.
        const releasing = this.release(first)
        controller.abort()
        if (await releasing) {
          told.push('releaseFailed')
          await this.doubt(id)
        }
        await this.sections.told(id, told)
        const second = await waiting.catch((err) => {
          this.tally.error(err)
          return null
        })
        if (second) await this.hold('dl', key, second, waitCalledAt)
      },
      'ex.acquire': async () => {
        const ex = this.exclusive(key)
        ex.soakBusy = true
        try {
          await this.exclusiveHold(ex, key)
        } finally {
          ex.soakBusy = false
        }
      },
      'maestro.acquire': async () => {
        const service = this.service(key)
        service.soakBusy = true
        try {
          await this.serviceHold(service, key)
        } finally {
          service.soakBusy = false
        }
      },
      'sg.createLock': () => this.syncguardLock('sg.createLock', key, (fn, config) => this.sgLock(fn, config)),
      'sg.lock': () => this.syncguardLock('sg.lock', key, (fn, config) => syncguard.lock(this.sgBackend, fn, config)),
      'sg.backend': async () => {
        const backend = this.sgBackend
        const calledAt = clock()
        const got = await this.watch('sg.acquire', OURS_MS, backend.acquire({ key, ttlMs: 1000 }))
        if (!got.ok) {
          this.tally.passes += 1
          return
        }
        const grantAt = clock()
        this.tally.grants += 1
        const id = await this.sections.run(this.counter('sg', key), grantAt, 'sg.backend', () => clockOfEpoch(got.expiresAtMs), calledAt)
        const info = await this.watch('sg.lookup', OURS_MS, backend.lookup({ key }))
        const owned = await this.watch('sg.owns', OURS_MS, syncguard.owns(backend, got.lockId))
        const extended = await this.watch('sg.extend', OURS_MS, backend.extend({ lockId: got.lockId, ttlMs: 1000 }))
        const released = await this.watch('sg.release', OURS_MS, backend.release({ lockId: got.lockId }))
        this.sgReleased.delete(got.lockId)
        const told = []
        if (info?.lockIdHash !== syncguard.hashKey(got.lockId)) told.push('lookupNotOurs')
        if (!owned) told.push('notOwned')
        if (!extended.ok) told.push('extendFailed')
        if (!released.ok) told.push('notOurs')
        await this.sections.told(id, told)
        if (!info || !owned || !extended.ok || !released.ok) await this.doubt(id)
      },
    }
  }

  /**
   * A section under `handle`, `during(handle)` after it, then the release; doubt noted.
   * `calledAt`: when its acquisition was called, the earliest Redis can have recorded the
   * hold: a kill of the lock server between then and the section empties the store under a
   * holder that has not written yet (the library puts such a hold in doubt, its watch or
   * `suspended` counting from the acquiring request's send).
   */
  async hold(api, key, handle, calledAt, during = async () => {}, via = 'dl') {
    const grantAt = clock()
    let lost = false
    handle.lost?.then(
      () => (lost = true),
      () => {},
    )
    this.tally.grants += 1
    let id
    let failed = false
    let told = []
    try {
      const atGrant = this.holdNote(handle, grantAt)
      id = await this.sections.run(this.counter(api, key), grantAt, api, () => clockOfEpoch(handle.info.expiresAt), calledAt)
      await this.sections.note(id, `${via}: ${atGrant}`)
      told = this.heldWords(handle)
      await during(handle)
    } catch (err) {
      this.tally.error(err)
      failed = true
    }
    const heldAtEnd = handle.isHeld
    const releaseFailed = await this.release(handle)
    if (!id) return
    if (lost && !told.includes('lost')) told.push('lost')
    if (failed) told.push('failed')
    if (!heldAtEnd && !told.includes('notHeld')) told.push('notHeld')
    if (releaseFailed) told.push('releaseFailed')
    await this.sections.told(id, told)
    if (lost || failed || releaseFailed || !heldAtEnd) await this.doubt(id)
  }

  /** A handle's fence, token and lease at its grant: which hold a section ran under, for an overlap's line. */
  holdNote(handle, grantAt) {
    const { fence, token, expiresAt, acquiredAt } = handle.info
    const at = (epoch) => (clockOfEpoch(epoch) - grantAt).toFixed(1)
    return `fence ${fence} token ${String(token).slice(0, 8)} acquired ${at(acquiredAt)} ms and expiring ${at(expiresAt)} ms from its grant`
  }

  /** What a DistributedLock handle tells its holder right after the section: lost, not held. */
  heldWords(handle) {
    const words = []
    if (!handle.isHeld) words.push('notHeld')
    if (handle.suspended) words.push('suspended')
    return words
  }

  /** A section through syncguard's lock(fn) (`run(fn, config)`); a failed final release puts it in doubt. */
  async syncguardLock(kind, key, run) {
    let id
    let releaseFailed = false
    const config = {
      key,
      ttlMs: 1000,
      acquisition: { timeoutMs: 200, retryDelayMs: 20 },
      onReleaseError: (err) => {
        releaseFailed = true
        this.tally.error(err)
      },
    }
    // The fence this process's last acquisition of `key` won is ours (fn runs right after it);
    // a lookup matching it gives our lockId and the lease's end, so that lock(fn)'s release,
    // silent when the lock was no longer ours, can be checked against the released events.
    let lockId
    let expiresAt
    const told = []
    // The acquisition was sent no earlier than this: a TTL from it is the earliest the lease
    // can end, should the lookup find it someone else's already (a stall before fn ran).
    const calledAt = clock()
    const section = async () => {
      const fence = this.sgFences.get(key)
      const grantAt = clock()
      this.tally.grants += 1
      const info = await syncguard.getByKeyRaw(this.sgBackend, key)
      if (info && info.fence === fence) {
        lockId = info.lockId
        expiresAt = clockOfEpoch(info.expiresAtMs)
      } else {
        told.push('notOursAtStart')
        expiresAt = calledAt + config.ttlMs
      }
      id = await this.sections.run(this.counter('sg', key), grantAt, kind, () => expiresAt, calledAt)
    }
    try {
      await this.watch(kind, 200 + 2 * OURS_MS, run(section, config))
    } catch (err) {
      releaseFailed = true
      throw err
    } finally {
      if (id) {
        if (releaseFailed) told.push('releaseFailed')
        else if (lockId === undefined || !this.sgReleased.delete(lockId)) told.push('notOurs')
        await this.sections.told(id, told)
      }
      if (id && releaseFailed) await this.doubt(id)
    }
  }

  async exclusiveHold(ex, key) {
    ex.soakLost = false
    // ExclusiveLock tells no expiry: its lease ends no earlier than a TTL after the acquire
    // was sent (one attempt, no wait). Refresh events are not counted: one sent before a stall
    // is told after it, and would date the lease from then.
    const sentAt = clock()
    const got = await this.watch('ex.acquire', DEFAULT_MS, ex.acquire())
    if (!got) {
      this.tally.passes += 1
      return
    }
    ex.soakLease = sentAt + ex.soakTtl
    const grantAt = clock()
    this.tally.grants += 1
    const id = await this.sections.run(this.counter('ex', key), grantAt, 'ex', () => ex.soakLease, sentAt)
    const told = []
    // Asked as the section ends: later, the refreshes (not counted in soakLease) keep it.
    if (clock() > ex.soakLease) told.push('pastLease')
    if (ex.soakLost) told.push('lost')
    if (!ex.acquired) told.push('notHeld')
    await sleep(rand(0, 800))
    const doubt = ex.soakLost || !ex.acquired
    if (ex.soakLost && !told.includes('lost')) told.push('lost')
    if (!ex.acquired && !told.includes('notHeld')) told.push('notHeld')
    await this.watch('ex.release', DEFAULT_MS, ex.release())
    await this.sections.told(id, told)
    if (doubt) await this.doubt(id)
  }

  async serviceHold(service, key) {
    const maxWait = rand(50, 300)
    // The service tells no expiry: its lease ends no earlier than a TTL after acquire() was
    // called (the grant comes within maxWait). Refresh events are not counted: one sent before
    // a stall is told after it, and would date the lease from then.
    const calledAt = clock()
    const got = await this.watch('maestro.acquire', maxWait + DEFAULT_MS, service.acquire(1500, maxWait))
    if (!got) {
      this.tally.passes += 1
      return
    }
    const grantAt = clock()
    service.soakLease = calledAt + 1500
    service.soakLost = false
    this.tally.grants += 1
    const id = await this.sections.run(this.counter('maestro', key), grantAt, 'maestro', () => service.soakLease, calledAt)
    const held = service.isLocked
    // maestro's release answers true for a lock already gone (expired), as the original does,
    // and isLocked turns false only once a refresh is found lost: a holder stalled past its
    // TTL may hear neither. Its own clock past a TTL from the call is what it can know.
    const pastLease = clock() > service.soakLease
    const released = await this.watch('maestro.release', DEFAULT_MS, service.release())
    const told = []
    if (pastLease) told.push('pastLease')
    if (service.soakLost) told.push('lost')
    if (!held) told.push('notHeld')
    if (!released) told.push('notOurs')
    await this.sections.told(id, told)
    if (!held || !released) await this.doubt(id)
  }

  async doubt(id) {
    this.tally.bump(this.tally.ops, `${this.backend.name}.inDoubt`)
    await this.sections.doubt(id)
  }

  exclusive(key) {
    let ex = this.exclusives.find((e) => e.soakKey === key && !e.soakBusy)
    if (!ex) {
      ex = new ExclusiveLock({
        name: `soak-${key}`,
        cache_connection: this.backend.url,
        lock_ttl_ms: 1500,
        lock_refresh_ms: 500,
        ...(this.backend.quarantineMs ? { restart_quarantine_ms: this.backend.quarantineMs } : {}),
      })
      ex.soakKey = key
      ex.soakTtl = 1500
      for (const event of ['acquired', 'refreshed', 'released']) {
        ex.on(event, () => this.tally.bump(this.tally.ops, `${this.backend.name}.ex.${event}`))
      }
      ex.on('error', (err) => {
        if (err.code === 'ELOST') {
          this.tally.lost += 1
          ex.soakLost = true
        }
        this.tally.error(err)
      })
      this.exclusives.push(ex)
    }
    return ex
  }

  service(key) {
    let service = this.services.find((s) => s.soakKey === key && !s.soakBusy)
    if (!service) {
      service = new DistributedLockService(`soak:maestro:${key}`, 1500, this.backend.url, {
        onLost: () => (service.soakLost = true),
        ...this.quarantine,
      })
      service.soakKey = key
      this.services.push(service)
    }
    return service
  }

  /** One actor: operations of `apis` (prefixes of the op names) until stop(). */
  async actor(apis) {
    while (!this.stopping) {
      const ops = this.ops()
      const names = Object.keys(ops).filter((name) => apis.some((api) => name.startsWith(api)) && (!this.onlyOps || this.onlyOps.includes(name)))
      // SOAK_OPS named none of this actor's operations: it has nothing to do.
      if (names.length === 0) return
      const name = pick(names)
      // One instance of ExclusiveLock or maestro's service is used by one actor at a time.
      try {
        await ops[name]()
      } catch (err) {
        if (err?.code === 'ELOCKED' || err?.code === 'AcquisitionTimeout') this.tally.passes += 1
        this.tally.error(err)
      }
      await sleep(rand(5, 25))
    }
  }

  /** Starts `perApi` actors for each API; answers a promise of their end. */
  start(perApi) {
    const runs = []
    // SOAK_APIS (e.g. `dl.`) narrows the traffic to some APIs, to chase one of them.
    const only = process.env.SOAK_APIS?.split(',')
    // SOAK_OPS (e.g. `dl.using`) narrows them further, to some operations of those APIs.
    this.onlyOps = process.env.SOAK_OPS?.split(',')
    for (const apis of [['dl.'], ['ex.'], ['maestro.'], ['sg.']].filter(([api]) => !only || only.includes(api))) {
      for (let i = 0; i < perApi; i += 1) runs.push(this.actor(apis))
    }
    this.running = Promise.all(runs)
    return this.running
  }

  /** Stops the actors once their current op settles, and releases what is still held. */
  async stop() {
    this.stopping = true
    await this.running
    for (const ex of this.exclusives) await ex.release().catch((err) => this.tally.error(err))
    for (const service of this.services) if (service.isLocked) await service.release()
    this.probe?.disconnect()
  }
}

module.exports = { Traffic }
