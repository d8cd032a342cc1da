'use strict'

// The soak's fail rules (scripts/soak/verdict.js, sections.js, tally.js), each shown to fire on
// synthetic figures and to stay quiet on clean ones: a soak whose rules never fire would pass
// whatever happened. No Redis: the rules judge what the processes reported.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { rssRule, nativeRule, heapRule, leakedResources, verdict } = require('../scripts/soak/verdict')
const { judgeSections } = require('../scripts/soak/sections')
const { Tally, clock, clockOfEpoch, RUN } = require('../scripts/soak/tally')

const RUN_MS = 60_000

/** A sample every 2 s over a 1-minute run, RSS `rssAt(ms since start)`. */
function samples(rssAt) {
  const out = []
  for (let at = 0; at <= RUN_MS; at += 2000) out.push({ at: 1_000_000 + at, rss: rssAt(at) })
  return out
}

test('rssRule: growth past 5 % after warm-up fails; flat, within 5 %, or within warm-up, passes', () => {
  const flat = rssRule(samples(() => 100), RUN_MS)
  assert.equal(flat.ok, true)
  assert.equal(flat.ratio, 1)
  // 100 MB through the window after warm-up (12-28 s), 110 MB in the last one.
  const grown = rssRule(samples((at) => (at < 40_000 ? 100 : 110)), RUN_MS)
  assert.equal(grown.ok, false)
  assert.equal(grown.ratio, 1.1)
  assert.equal(grown.afterWarmupMb, 100)
  assert.equal(grown.lastMb, 110)
  // Just under the limit and just past it.
  assert.equal(rssRule(samples((at) => (at < 40_000 ? 100 : 105)), RUN_MS).ok, true)
  assert.equal(rssRule(samples((at) => (at < 40_000 ? 100 : 105.5)), RUN_MS).ok, false)
  assert.equal(rssRule(samples((at) => (at < 40_000 ? 200 : 210)), RUN_MS).ok, true)
  assert.equal(rssRule(samples((at) => (at < 40_000 ? 200 : 210.5)), RUN_MS).ok, false)
  // The first 12 s are warm-up: growing there is not a leak.
  assert.equal(rssRule(samples((at) => (at < 10_000 ? 50 : 100)), RUN_MS).ok, true)
  assert.ok(rssRule(samples(() => 100).slice(0, 5), RUN_MS).skipped)
})

test('rssRule: samples caught high by traffic in flight pass; growth under every sample fails', () => {
  // Every other sample of the last window 12 MB up (a median would read 106 MB, past 5 %).
  const noisy = rssRule(samples((at) => (at >= 40_000 && (at / 2000) % 2 === 1 ? 112 : 100)), RUN_MS)
  assert.equal(noisy.ok, true)
  assert.equal(noisy.lastMb, 100)
  // A leak lifts the lowest samples too: 100 MB, then 110-116 MB, never back to 100.
  const leak = rssRule(samples((at) => (at < 40_000 ? 100 : 110 + ((at / 2000) % 2) * 6)), RUN_MS)
  assert.equal(leak.ok, false)
  assert.equal(leak.lastMb, 110)
})

test('rssRule: RSS taken up by idle V8 pages passes; growth of what is live fails', () => {
  // 12 MB more RSS at the end, all of it pages V8 kept after a collection.
  const kept = samples((at) => (at < 40_000 ? 100 : 112)).map((s, i) => ({ ...s, v8Idle: s.rss - 100 + (i % 3) }))
  const judged = rssRule(kept, RUN_MS)
  assert.equal(judged.ok, true)
  // The same RSS with the idle pages flat: the 12 MB are live, a leak.
  const live = samples((at) => (at < 40_000 ? 100 : 112)).map((s) => ({ ...s, v8Idle: 3 }))
  assert.equal(rssRule(live, RUN_MS).ok, false)
})

test('nativeRule: the allocator\'s figure grown past 5 % and 1 MB fails; flat under RSS moved by V8, or within the slack, passes', () => {
  // RSS less idle V8 pages 3 MB up at the end (within its 5 %); the allocator flat.
  const flat = samples((at) => (at < 40_000 ? 68 : 71)).map((s, i) => ({ ...s, nativeMb: 10 + (i % 3) * 0.2 }))
  assert.equal(rssRule(flat, RUN_MS).ok, true)
  const judged = nativeRule(flat, RUN_MS)
  assert.equal(judged.ok, true)
  assert.equal(judged.afterWarmupMb, 10)
  // A native leak: every sample of the last window 1.5 MB up, hidden in RSS by V8's pages.
  const leak = samples(() => 68).map((s) => ({ ...s, nativeMb: s.at - 1_000_000 < 40_000 ? 10 : 11.5 }))
  assert.equal(rssRule(leak, RUN_MS).ok, true)
  assert.equal(nativeRule(leak, RUN_MS).ok, false)
  // Within the 1 MB slack (5 % of 10 MB would be 0.5): passes; over a larger base, 5 % rules.
  const native = (early, late) => samples(() => 68).map((s) => ({ ...s, nativeMb: s.at - 1_000_000 < 40_000 ? early : late }))
  assert.equal(nativeRule(native(10, 10.9), RUN_MS).ok, true)
  assert.equal(nativeRule(native(40, 41.9), RUN_MS).ok, true)
  assert.equal(nativeRule(native(40, 42.5), RUN_MS).ok, false)
  // The allocator not asked (not glibc): skipped, not passed.
  assert.ok(nativeRule(samples(() => 68), RUN_MS).skipped)
})

test('heapRule: V8\'s live heap grown past 5 % and 1 MB fails; the 0.2-0.5 MB a soak\'s parent gains passes', () => {
  const heap = (early, late) => samples(() => 68).map((s) => ({ ...s, heapUsed: s.at - 1_000_000 < 40_000 ? early : late }))
  assert.equal(heapRule(heap(7.1, 7.6), RUN_MS).ok, true)
  const leak = heapRule(heap(7.1, 8.5), RUN_MS)
  assert.equal(leak.ok, false)
  assert.equal(leak.lastMb, 8.5)
  assert.ok(heapRule(samples(() => 68), RUN_MS).skipped)
})

test('leakedResources: a type with more left after close than at start is named', () => {
  assert.deepEqual(leakedResources({ TCPSocketWrap: 1, Timeout: 2 }, { TCPSocketWrap: 3, Timeout: 2 }), {
    TCPSocketWrap: '1 -> 3',
  })
  assert.deepEqual(leakedResources({}, { Timeout: 1 }), { Timeout: '0 -> 1' })
  assert.deepEqual(leakedResources({ TCPSocketWrap: 2 }, { TCPSocketWrap: 1 }), {})
  assert.deepEqual(leakedResources({ Timeout: 1 }, {}), {})
})

/** What checkSections reads back, for sections [counterKey, grantAt, end, id]. */
function readBack(sections, counters, doubt = []) {
  return {
    records: sections.map(([key, grantAt, end, id]) => `${key}|${grantAt}|${end - 1}|${id}`),
    ends: Object.fromEntries(sections.map(([, , end, id]) => [id, String(end)])),
    doubt,
    counters,
  }
}

test('judgeSections: two sections of a key overlapping fail; in turn they pass', () => {
  const apart = judgeSections(readBack([['c', 0, 10, 'a'], ['c', 10, 20, 'b']], { c: 2 }))
  assert.deepEqual(apart.failures, [])
  assert.equal(apart.overlaps, 0)
  const overlapping = judgeSections(readBack([['c', 0, 10, 'a'], ['c', 5, 20, 'b']], { c: 2 }))
  assert.equal(overlapping.overlaps, 1)
  assert.deepEqual(overlapping.failures, ['c: sections a and b (clean) overlap by 5.00 ms'])
  // Other keys never overlap each other.
  assert.deepEqual(judgeSections(readBack([['c', 0, 10, 'a'], ['d', 5, 20, 'b']], { c: 1, d: 1 })).failures, [])
})

test('judgeSections: an update lost (counter below the sections) fails, as does one too many', () => {
  const lost = judgeSections(readBack([['c', 0, 10, 'a'], ['c', 10, 20, 'b']], { c: 1 }))
  assert.deepEqual(lost.failures, ['c: counter 1, sections 2'])
  assert.deepEqual(judgeSections(readBack([['c', 0, 10, 'a']], { c: 2 })).failures, ['c: counter 2, sections 1'])
})

test('judgeSections: an overlap across a restart fails unless restarts are excused, and then only its lost update is', () => {
  const sections = [['c', 0, 10, 'a'], ['c', 5, 20, 'b']]
  const strict = judgeSections(readBack(sections, { c: 1 }, ['a']), { restarts: [3] })
  assert.equal(strict.overlapsAcrossRestarts, 1)
  assert.equal(strict.failedAcrossRestarts, 1)
  assert.equal(strict.inDoubt, 1)
  assert.deepEqual(strict.failures, [
    'c: sections a and b (in doubt, the first across a restart) overlap by 5.00 ms',
    'c: counter 1, sections 2',
  ])
  assert.deepEqual(judgeSections(readBack(sections, { c: 1 }), { restarts: [3], excuseRestarts: true }).failures, [])
  // A restart outside the first section excuses nothing.
  const elsewhere = judgeSections(readBack(sections, { c: 1 }), { restarts: [15], excuseRestarts: true })
  assert.equal(elsewhere.overlaps, 1)
  assert.equal(elsewhere.failures.length, 2)
})

/**
 * What checkSections reads back with the soak's diagnostics, for sections [counterKey,
 * grantAt, end, id, api, expiresAt, told, heldSince] (told undefined: no verdict written;
 * heldSince: when the acquisition was called, where the hold begins before the section).
 */
function readBackJudged(sections, counters) {
  const base = readBack(sections, counters)
  return {
    ...base,
    leases: Object.fromEntries(sections.map(([, , end, id, api, expiresAt, , heldSince]) => [id, `${end - 1}|${expiresAt ?? ''}|${api}|${heldSince ?? ''}`])),
    told: Object.fromEntries(sections.filter((s) => s[6] !== undefined).map(([, , , id, , , told]) => [id, told])),
  }
}

test('judgeSections: an overlap after the first lease ended, its holder told, is counted, not failed', () => {
  // a: granted at 0 with a lease to 100, stalled, its SET answered at 150; b granted at 120.
  const judged = judgeSections(readBackJudged([['c', 0, 150, 'a', 'sg.lock', 100, 'notOurs'], ['c', 120, 130, 'b', 'sg.lock', 1120, 'ok']], { c: 2 }))
  assert.deepEqual(judged.failures, [])
  assert.equal(judged.overlaps, 0)
  assert.equal(judged.expiredOverlaps, 1)
  assert.match(judged.expired[0], /^c: sections a and b \(clean\) overlap by 30\.00 ms; a: sg\.lock held 150 ms, lease ended 20\.0 ms before the other's grant, told notOurs/)
  assert.deepEqual(judged.verdicts, { 'sg.lock notOurs': 1, 'sg.lock ok': 1 })
  // The stalled one may be the second: granted (by Redis) before its stall, lease over before a's grant.
  const late = judgeSections(readBackJudged([['c', 0, 150, 'a', 'dl', 1000, 'ok'], ['c', 120, 200, 'b', 'dl', -5, 'notHeld']], { c: 2 }))
  assert.deepEqual(late.failures, [])
  assert.equal(late.expiredOverlaps, 1)
})

test('judgeSections: an overlap fails when the lease had not ended by the library\'s account, or the library said all was well', () => {
  // The library told the first holder, but its lease ran past the second's grant.
  const live = judgeSections(readBackJudged([['c', 0, 150, 'a', 'dl', 130, 'notHeld'], ['c', 120, 160, 'b', 'dl', 1120, 'ok']], { c: 2 }))
  assert.equal(live.overlaps, 1)
  assert.equal(live.expiredOverlaps, 0)
  assert.equal(live.failures.length, 1)
  assert.match(live.failures[0], /^c: sections a and b \(clean\) overlap by 30\.00 ms; a: dl held 150 ms, lease ended -10\.0 ms before the other's grant, told notHeld/)
  // The lease had ended, but the library answered that all was well (release ours).
  const quiet = judgeSections(readBackJudged([['c', 0, 150, 'a', 'maestro', 100, 'ok'], ['c', 120, 160, 'b', 'maestro', 1620, 'ok']], { c: 2 }))
  assert.equal(quiet.overlaps, 1)
  assert.equal(quiet.failures.length, 1)
  // No verdict (the holder died before it) and no lease known: both fail.
  const dead = judgeSections(readBackJudged([['c', 0, 150, 'a', 'ex', 100, undefined], ['c', 120, 160, 'b', 'ex', 1620, 'ok']], { c: 2 }))
  assert.equal(dead.failures.length, 1)
  const unknown = judgeSections(readBackJudged([['c', 0, 150, 'a', 'ex', undefined, 'lost'], ['c', 120, 160, 'b', 'ex', 1620, 'ok']], { c: 2 }))
  assert.equal(unknown.failures.length, 1)
  // Within what moving it onto clock() can miss (0.1 ms) the lease counts as ended; past it, not.
  const rounding = (expiresAt) => judgeSections(readBackJudged([['c', 0, 150, 'a', 'dl', expiresAt, 'notHeld'], ['c', 120, 160, 'b', 'dl', 1120, 'ok']], { c: 2 }))
  assert.equal(rounding(120.05).failures.length, 0)
  assert.equal(rounding(120.2).failures.length, 1)
})

test('judgeSections: an update lost in an expired, told overlap is excused; two lost in one are not', () => {
  const sections = [['c', 0, 150, 'a', 'dl', 100, 'notHeld'], ['c', 120, 130, 'b', 'dl', 1120, 'ok']]
  assert.deepEqual(judgeSections(readBackJudged(sections, { c: 1 })).failures, [])
  assert.deepEqual(judgeSections(readBackJudged(sections, { c: 0 })).failures, ['c: counter 0, sections 2'])
})

test('clockOfEpoch: a wall-clock time lands on clock() within the millisecond Date.now() floors away', () => {
  for (let i = 0; i < 50; i += 1) {
    const before = clock()
    const now = clockOfEpoch(Date.now())
    const after = clock()
    // Date.now() is up to 1 ms early; the offset itself within a few µs (0.1 ms allowed for a loaded machine).
    assert.ok(now <= after + 0.1 && now > before - 1.1, `${now - before} ms from the reading`)
  }
})

test('RUN: a process start\'s name is its pid and a random part, so a pid that comes back is not the same run', () => {
  assert.match(RUN, new RegExp(`^${process.pid}-[0-9a-f]{8}$`))
  const other = require('node:child_process').execFileSync(process.execPath, ['-p', `require(${JSON.stringify(require.resolve('../scripts/soak/tally'))}).RUN`], { encoding: 'utf8' }).trim()
  assert.notEqual(other.split('-')[1], RUN.split('-')[1])
})

test('Tally.watch: a promise pending past its bound + 1 s is listed as unsettled; one settled in time is not', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] })
  const tally = new Tally()
  tally.watch('stuck', 500, new Promise(() => {}))
  let settle
  tally.watch('slow', 500, new Promise((resolve) => (settle = resolve)))
  t.mock.timers.tick(1400)
  settle()
  // Its settling is seen (a microtask) before the clock moves past its bound.
  await new Promise((resolve) => setImmediate(resolve))
  assert.equal(tally.pending, 1)
  t.mock.timers.tick(200)
  assert.deepEqual(
    tally.unsettled.map((u) => [u.kind, u.boundMs]),
    [['stuck', 500]],
  )
})

test('Tally.error: the restart quarantine\'s refusals are counted apart from a server that refuses connections', () => {
  const tally = new Tally()
  const refused = (code, message) => Object.assign(new Error(message), { code })
  tally.error(refused('ECONNECTION', 'cannot reach Redis: Redis was restarted 3 ms ago; no lock is given for restartQuarantineMs (2000) after a restart'))
  tally.error(refused('ServiceUnavailable', 'Redis connection error: cannot reach Redis: Redis was restarted 0 ms ago; no lock is given for restartQuarantineMs (2000) after a restart'))
  tally.error(refused('ECONNECTION', 'cannot reach Redis: connection refused'))
  tally.error(new DOMException('aborted', 'AbortError'))
  assert.deepEqual(tally.errors, { 'ECONNECTION.quarantine': 1, 'ServiceUnavailable.quarantine': 1, ECONNECTION: 1, AbortError: 1 })
})

/** One process's report as runProcess answers it, clean unless `changes` say otherwise. */
function processReport(changes = {}) {
  return {
    label: 'child 1',
    wholeRun: true,
    samples: samples(() => 100),
    result: { failures: [], unsettled: [], pendingAtClose: 0, resourcesAtStart: { Timeout: 1 }, resourcesAfterClose: { Timeout: 1 }, ...changes.result },
    ...changes.process,
  }
}

test('verdict: each rule turns into a failure, and a clean run has none', () => {
  const noSections = { failures: [] }
  const judge = (changes, sections = noSections) => verdict({ processes: [processReport(changes)], sections, runMs: RUN_MS }).failures
  assert.deepEqual(judge({}), [])
  assert.deepEqual(judge({ result: { failures: ['unhandledRejection: boom'] } }), ['child 1: unhandledRejection: boom'])
  assert.deepEqual(judge({ result: { unsettled: [{ kind: 'redis.dl.acquire', boundMs: 6100 }] } }), [
    'child 1: redis.dl.acquire unsettled past its bound (6100 ms) + 1 s',
  ])
  assert.deepEqual(judge({ result: { resourcesAfterClose: { Timeout: 1, TCPSocketWrap: 1 } } }), [
    'child 1: resources left after close {"TCPSocketWrap":"0 -> 1"}',
  ])
  assert.deepEqual(judge({ result: { pendingAtClose: 2 } }), ['child 1: 2 ops pending at close'])
  assert.deepEqual(judge({ process: { samples: samples((at) => (at < 40_000 ? 100 : 120)) } }), [
    'child 1: RSS (less idle V8 pages) lower quartile 120.00 MB at the end > 100.00 MB after warm-up + 5 %',
  ])
  const figure = (name) => samples(() => 100).map((s) => ({ ...s, [name]: s.at - 1_000_000 < 40_000 ? 10 : 12 }))
  assert.deepEqual(judge({ process: { samples: figure('nativeMb') } }), [
    'child 1: native memory (C allocator) lower quartile 12.00 MB at the end > 10.00 MB after warm-up + max(5 %, 1 MB)',
  ])
  assert.deepEqual(judge({ process: { samples: figure('heapUsed') } }), [
    'child 1: live JS heap lower quartile 12.00 MB at the end > 10.00 MB after warm-up + max(5 %, 1 MB)',
  ])
  // RSS is judged only for a process that ran the whole time (a respawned child did not).
  assert.deepEqual(judge({ process: { wholeRun: false, samples: samples((at) => (at < 40_000 ? 100 : 120)) } }), [])
  assert.deepEqual(judge({ process: { exitMs: 1500 } }), ['child 1: exit took 1500 ms'])
  assert.deepEqual(judge({ process: { crashed: 'exited with 1' } }), ['child 1: exited with 1'])
  assert.deepEqual(judge({ process: { result: undefined } }), ['child 1: no closing figures'])
  assert.deepEqual(judge({ process: { result: undefined, killed: true } }), [])
  assert.deepEqual(judge({}, { failures: ['c: counter 1, sections 2'] }), ['c: counter 1, sections 2'])
})

test('judgeSections: a kill of the lock server after the acquisition was called and before the section counts as across a restart', () => {
  // syncguard's lock(fn): acquired from 95 on, the server killed at 98, fn's section from 100,
  // its lookup told it the lock was not its own; another took the emptied key at 105.
  const sections = [
    ['c', 100, 150, 'a', 'sg.lock', 1095, 'notOursAtStart,notOurs', 95],
    ['c', 105, 120, 'b', 'sg.lock', 1105, 'ok'],
  ]
  const strict = judgeSections(readBackJudged(sections, { c: 1 }), { restarts: [98] })
  assert.equal(strict.overlapsAcrossRestarts, 1)
  assert.match(strict.failures[0], /\(clean, the first across a restart\)/)
  assert.match(strict.failures[0], /nearest kill of the lock server 2\.0 ms before the first's grant/)
  assert.deepEqual(judgeSections(readBackJudged(sections, { c: 1 }), { restarts: [98], excuseRestarts: true }).failures, [])
  // Without the acquisition's time the kill is outside the section: nothing is excused.
  const unknown = sections.map((section) => section.slice(0, 7))
  const judged = judgeSections(readBackJudged(unknown, { c: 1 }), { restarts: [98], excuseRestarts: true })
  assert.equal(judged.overlaps, 1)
  assert.equal(judged.failures.length, 2)
})

test('judgeSections: with restarts not excused (the soak\'s quarantine on), a holder across a restart whose lease had ended by its own account, told, is a frozen holder: counted apart, not failed', () => {
  // a: granted at 0 with a lease to 2000, the server killed at 10, a frozen past the quarantine
  // and told notHeld; b granted on the restarted server at 2015, after the quarantine.
  const frozen = [
    ['c', 0, 2100, 'a', 'dl', 2000, 'notHeld'],
    ['c', 2015, 2030, 'b', 'dl', 4015, 'ok'],
  ]
  const judged = judgeSections(readBackJudged(frozen, { c: 1 }), { restarts: [10] })
  assert.deepEqual(judged.failures, [])
  assert.equal(judged.overlapsAcrossRestarts, 1)
  assert.equal(judged.expiredAcrossRestarts, 1)
  assert.equal(judged.failedAcrossRestarts, 0)
  // Granted on the restarted server while the first's lease still ran: the guarantee broken.
  const early = [
    ['c', 0, 2100, 'a', 'dl', 2000, 'notHeld'],
    ['c', 15, 30, 'b', 'dl', 2015, 'ok'],
  ]
  const broken = judgeSections(readBackJudged(early, { c: 1 }), { restarts: [10] })
  assert.equal(broken.failedAcrossRestarts, 1)
  assert.equal(broken.expiredAcrossRestarts, 0)
  assert.match(broken.failures[0], /\(clean, the first across a restart\) overlap by 2085\.00 ms/)
})

test('soak.js: --excuse-restarts=yes is refused with the quarantine on, and a bad --restart-quarantine-ms named, before any server starts', () => {
  const soak = require('node:path').join(__dirname, '..', 'scripts', 'soak.js')
  const run = (...args) => require('node:child_process').spawnSync(process.execPath, [soak, ...args], { encoding: 'utf8', timeout: 10_000 })
  const excused = run('--excuse-restarts=yes')
  assert.equal(excused.status, 1)
  assert.match(excused.stderr, /--excuse-restarts=yes excuses overlaps across restarts, which --restart-quarantine-ms=2000 forbids; pass --restart-quarantine-ms=0 with it/)
  const bad = run('--restart-quarantine-ms=1.5')
  assert.equal(bad.status, 1)
  assert.match(bad.stderr, /--restart-quarantine-ms must be a whole number of ms from 0, got 1\.5/)
})

test('judgeSections: what each holder noted of its hold (fence, token, when told lost) is on the overlap\'s line', () => {
  const sections = [['c', 0, 150, 'a', 'dl.using', 800, 'notHeld'], ['c', 120, 160, 'b', 'dl.using', 1020, 'ok']]
  const notes = { a: 'fence 7 token 1234abcd, told lost at 140.0 (x)', b: 'fence 9 token 9876fedc' }
  const judged = judgeSections({ ...readBackJudged(sections, { c: 2 }), notes })
  assert.equal(judged.failures.length, 1)
  assert.match(judged.failures[0], /a: dl\.using held 150 ms, .*told notHeld, fence 7 token 1234abcd, told lost at 140\.0 \(x\); b: .*told ok, fence 9 token 9876fedc$/)
  // Without notes the line is as before.
  assert.doesNotMatch(judgeSections(readBackJudged(sections, { c: 2 })).failures[0], /fence/)
})

test('judgeSections: a step forward of the wall clock while the first held, before the second\'s grant, is named on the overlap\'s line and counted', () => {
  // a held from 100 (acquired at 95), its lease to 1000 by its own account; b took the key at
  // 120, the wall clock having stepped 900 ms forward at 110: Redis ended a's lease early.
  const sections = [
    ['c', 100, 150, 'a', 'dl.using', 1000, 'ok', 95],
    ['c', 120, 130, 'b', 'dl.using', 1020, 'ok'],
  ]
  const judged = judgeSections(readBackJudged(sections, { c: 2 }), { wallSteps: [{ at: 110, ms: 900 }] })
  assert.equal(judged.overlapsNearWallSteps, 1)
  assert.equal(judged.overlaps, 1, 'a step explains an overlap; it does not excuse it')
  assert.match(judged.failures[0], /; the wall clock stepped \+900\.0 ms 10\.0 ms before the second's grant$/)
  // A step back (leases only get longer), one before the hold began or after the second's
  // grant is not named.
  for (const step of [{ at: 110, ms: -900 }, { at: 90, ms: 900 }, { at: 125, ms: 900 }]) {
    const other = judgeSections(readBackJudged(sections, { c: 2 }), { wallSteps: [step] })
    assert.equal(other.overlapsNearWallSteps, 0, JSON.stringify(step))
    assert.doesNotMatch(other.failures[0], /wall clock/)
  }
})

// The tests run on glibc 2.33+ (Debian), where mallinfo2 is there to ask; null elsewhere.
test('nativeMemory: the allocator\'s figures follow a native allocation and its release', () => {
  const { nativeMemory, collectNativeMemory } = require('../lib/native')
  const before = nativeMemory()
  assert.notEqual(before, null, 'glibc\'s mallinfo2 was not found')
  assert.ok(before.inUseMb > 0 && before.fromSystemMb >= before.inUseMb, JSON.stringify(before))
  // Node's ArrayBuffer allocator is the C allocator's: 16 MB, touched, is 16 MB more in use.
  let block = new Uint8Array(16 * 1048576).fill(1)
  const during = nativeMemory()
  assert.ok(during.inUseMb - before.inUseMb > 15, JSON.stringify({ before, during }))
  block = null
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  gc()
  gc()
  collectNativeMemory()
  const after = nativeMemory()
  assert.ok(during.inUseMb - after.inUseMb > 15, JSON.stringify({ during, after }))
})
