'use strict'

// The soak's close (scripts/soak/sections.js's checkSections): the sections every process
// wrote on the data server, read back and judged. Records come in the order their SETs ran,
// from several processes, not in the order of their grants: a holder stalled past its lease
// writes after holders granted later. The verdicts must be those of the sweep by grant time
// whatever the arrival order; __test__/fixtures/soak-sections-expected.json holds what the
// checker that read every section into memory at once answered on a seeded run: that
// checker's checkSections on helpers/soak-sections.js's scenario(26, { count: 3000 }), with the
// scenario's restarts and wall-clock steps, strict and with restarts excused.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedis } = require('./helpers/redis-server')
const { scenario, readBackOf, store } = require('./helpers/soak-sections')
const { checkSections, judgeSections } = require('../scripts/soak/sections')
const expected = require('./fixtures/soak-sections-expected.json')

let server
let data

before(async () => {
  server = await startRedis()
  data = new Redis(server.url, { maxRetriesPerRequest: 1 })
})

after(async () => {
  await data.quit()
  await server.close()
})

/** A section of the hand-made cases: times on clock(), the rest as the soak notes it. */
const section = (counterKey, id, grantAt, end, api, expiresAt, told, extra = {}) => ({
  counterKey,
  id,
  grantAt,
  sentAt: end - 0.3,
  readAt: (grantAt + 0.1).toFixed(3),
  end,
  writeAt: (end - 0.2).toFixed(3),
  api,
  expiresAt: expiresAt?.toFixed(3),
  heldSince: undefined,
  told,
  note: undefined,
  doubt: false,
  ...extra,
})

test('checkSections: a stalled holder\'s record arriving after later grants, from other processes, is judged in grant order', async () => {
  await data.flushall()
  // Process 11-a (a) stalled from 100 to 600, its lease over at 130 and told so; 12-b and 13-c
  // held c after it, in turn, then 12-b's d overlapped e clean. Key k: a clean overlap whose
  // first record came second.
  const sections = [
    section('c', '12-b:1', 140, 150, 'dl', 170, 'ok'),
    section('c', '13-c:1', 151, 160, 'dl', 180, 'ok'),
    section('k', '13-c:2', 20, 40, 'ex', 60, 'ok'),
    section('k', '12-b:2', 10, 30, 'ex', 50, 'ok'),
    section('c', '11-a:1', 100, 600, 'sg.lock', 130, 'notOurs', { doubt: true }),
    section('c', '12-b:3', 700, 720, 'dl', 730, 'ok'),
    section('c', '13-c:3', 710, 725, 'dl', 740, 'ok'),
  ]
  const readBack = { sections, counters: { c: 5, k: 1 }, doubtWithoutRecord: [] }
  await store(data, readBack)
  const judged = await checkSections(data)
  assert.deepEqual(judged, judgeSections(readBackOf(readBack)))
  assert.equal(judged.sections, 7)
  assert.equal(judged.inDoubt, 1)
  assert.equal(judged.counters, 2)
  // a overlaps both later holders, each excused (its lease ended before their grants, told);
  // b and c do not overlap each other; 12-b:3 and 13-c:3 do, clean; k's two overlap, clean.
  assert.equal(judged.expiredOverlaps, 2)
  assert.match(judged.expired[0], /^c: sections 11-a:1 and 12-b:1 \(in doubt\) overlap by 460\.00 ms; 11-a:1: sg\.lock held 500 ms, lease ended 10\.0 ms before/)
  assert.match(judged.expired[1], /^c: sections 11-a:1 and 13-c:1 \(in doubt\) overlap by 449\.00 ms/)
  assert.equal(judged.overlaps, 2)
  assert.equal(judged.failures.length, 3)
  assert.match(judged.failures[0], /^c: sections 12-b:3 and 13-c:3 \(clean\) overlap by 10\.00 ms/)
  assert.match(judged.failures[1], /^k: sections 12-b:2 and 13-c:2 \(clean\) overlap by 10\.00 ms/)
  assert.equal(judged.failures[2], 'k: counter 1, sections 2')
  assert.deepEqual(judged.verdicts, { 'dl ok': 4, 'ex ok': 2, 'sg.lock notOurs': 1 })
})

test('checkSections: a seeded run of 3000 sections from 5 processes gets the verdicts the checker gave before, strict and with restarts excused', async () => {
  const run = scenario(expected.seed, { count: expected.count })
  const memory = readBackOf(run)
  for (const [name, options] of [
    ['strict', { restarts: run.restarts, wallSteps: run.wallSteps }],
    ['excused', { restarts: run.restarts, wallSteps: run.wallSteps, excuseRestarts: true }],
  ]) {
    // A check takes the records off their list: each judges its own copy.
    await data.flushall()
    await store(data, run)
    const judged = await checkSections(data, options)
    assert.deepEqual(judged, expected[name], name)
    // The JSON too: its verdicts listed as the records first met them.
    assert.equal(JSON.stringify(judged), JSON.stringify(expected[name]), name)
    assert.deepEqual(judgeSections(memory, options), expected[name], name)
  }
})

/**
 * `client` (ioredis), logging each command's name, how many arguments it sent and, for an
 * array reply, how many entries came back; a pipeline's commands likewise.
 */
function logged(client, log) {
  return new Proxy(client, {
    get(target, name) {
      const value = Reflect.get(target, name)
      if (typeof value !== 'function') return value
      if (name === 'pipeline' || name === 'multi') return (...args) => logged(value.apply(target, args), log)
      return (...args) => {
        const entry = { name, args: args.flat().length }
        log.push(entry)
        const reply = value.apply(target, args)
        if (reply && typeof reply.then === 'function') {
          return reply.then((out) => {
            if (Array.isArray(out)) entry.entries = name === 'exec' ? Math.max(0, ...out.map(([, r]) => (Array.isArray(r) ? r.length : 0))) : out.length
            return out
          })
        }
        return reply
      }
    },
  })
}

test('checkSections: however many sections, no command reads or sends more than a chunk of them, the records are taken off their list as read, and the close leaves nothing else on the data server', async () => {
  await data.flushall()
  const run = scenario(expected.seed, { count: expected.count })
  await store(data, run)
  const keysBefore = (await data.keys('*')).sort()
  const log = []
  const judged = await checkSections(logged(data, log), { restarts: run.restarts, wallSteps: run.wallSteps, chunk: 50 })
  assert.deepEqual(judged, expected.strict)
  const names = new Set(log.map((entry) => entry.name))
  for (const whole of ['hgetall', 'smembers', 'hkeys', 'hvals', 'sort']) assert.ok(!names.has(whole), `${whole} reads a whole table`)
  const widest = Math.max(...log.map((entry) => entry.entries ?? 0))
  assert.ok(widest <= 50, `a reply of ${widest} entries`)
  // zadd sends a score and a member a section.
  const busiest = Math.max(...log.map((entry) => entry.args))
  assert.ok(busiest <= 2 * 50 + 1, `a command of ${busiest} arguments`)
  assert.ok(log.filter((entry) => entry.name === 'lpop').length >= 3000 / 50)
  // The records are taken off their list as they are read; nothing else is left or gone.
  assert.deepEqual((await data.keys('*')).sort(), keysBefore.filter((key) => key !== 'soak:sections'))
})

test('checkSections: a record without a grant time fails the check by name, leaving no sorted set behind', async () => {
  await data.flushall()
  await store(data, { sections: [section('c', '12-b:1', 140, 150, 'dl', 170, 'ok')], counters: { c: 1 }, doubtWithoutRecord: [] })
  await data.rpush('soak:sections', 'c|not-a-time|151|12-b:2')
  await assert.rejects(checkSections(data, { chunk: 1 }), /section record 1 has no grant time: c\|not-a-time/)
  assert.deepEqual(await data.keys('soak:check*'), [])
})
