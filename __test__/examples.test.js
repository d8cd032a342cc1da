'use strict'

// Every script in examples/ runs, on the embedded memory:// backend (no REDIS_URL) and on a
// private redis-server (REDIS_URL), and prints what it shows.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { startRedis } = require('./helpers/redis-server')

const DIR = path.join(__dirname, '..', 'examples')
let redis

before(async () => {
  redis = await startRedis()
})

after(async () => {
  await redis.stop()
})

function example(file, env) {
  const base = { ...process.env }
  delete base.REDIS_URL
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(DIR, file)], { env: { ...base, ...env }, timeout: 30_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr }),
    )
  })
}

/** What each example must print, line by line (regexps), whichever backend it runs on. */
const EXPECTED = {
  'leader-election.js': [
    /^node-a is the leader$/, /^node-b is a follower$/, /^the lock says: node-a leads$/,
    /^node-a steps down$/, /^node-b is the leader$/,
  ],
  'cron-once.js': [
    /^instance-\d (ran the report \(fence \d{15}\)|skipped)$/, /^instance-\d (ran|skipped)/, /^instance-\d (ran|skipped)/,
    /^ran 1 time\(s\) for 3 instances$/, /^instance-4 \(late clock\) skipped$/,
  ],
  'job-dedup.js': [
    ...Array(3).fill(/^worker-[ab] did job-\d$/),
    ...Array(3).fill(/^worker-[ab] skipped job-\d: another worker has it$/),
    /^worker-c skipped job-2: already done$/, /^jobs done: 3 of 7 deliveries$/,
  ],
  'long-export.js': [
    /^exported 6 chunks in 3000 ms with a 2000 ms lock$/, /^extended 6 times; still held: true$/,
    /^another exporter meanwhile: refused$/, /^released; locked now: false$/,
  ],
  'fenced-writes.js': [
    /^B's fence is higher than A's: true$/, /^B writes: accepted$/, /^A wakes up and writes: refused$/,
    /^stored: balance=120 \(B\)$/, /^fencedSet by B: true$/, /^fencedSet by A: false$/,
  ],
  'syncguard-lock.js': [
    /^each charge saw the other's result: (70, 50|80, 50)$/, /^balance: 50$/,
    /^a failed charge threw "payment gateway down"$/, /^the lock was released after it: true$/,
  ],
}

test('every example has its expected output here', () => {
  const scripts = fs.readdirSync(DIR).filter((f) => f.endsWith('.js') && f !== 'opentelemetry.js')
  assert.deepEqual(scripts.sort(), Object.keys(EXPECTED).sort())
})

for (const [file, lines] of Object.entries(EXPECTED)) {
  for (const backend of ['memory://', 'redis-server']) {
    test(`${file} on ${backend}`, async () => {
      const env = backend === 'memory://' ? {} : { REDIS_URL: redis.url }
      const { code, stdout, stderr } = await example(file, env)
      assert.equal(code, 0, stderr)
      assert.equal(stderr, '')
      const [first, ...rest] = stdout.trim().split('\n')
      assert.equal(first, `backend: ${backend === 'memory://' ? 'memory://examples' : 'REDIS_URL'}`)
      assert.equal(rest.length, lines.length, stdout)
      rest.forEach((line, i) => assert.match(line, lines[i], stdout))
    })
  }
}
