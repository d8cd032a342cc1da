'use strict'

// examples/opentelemetry.js, run as a user runs it: on memory:// and on a test redis-server
// (REDIS_URL), its spans and metrics recorded; without @opentelemetry/api it says how to
// install it and exits 0.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { startRedis } = require('./helpers/redis-server')

const EXAMPLE = path.join(__dirname, '..', 'examples', 'opentelemetry.js')
const HIDE_OTEL = path.join(__dirname, 'fixtures', 'hide-otel.js')
let server

before(async () => {
  server = await startRedis()
})

after(async () => {
  await server?.close()
})

function run(env, args = []) {
  return new Promise((resolve, reject) => {
    const childEnv = { ...process.env, ...env }
    if (env.REDIS_URL === undefined) delete childEnv.REDIS_URL
    execFile(process.execPath, [...args, EXAMPLE], { env: childEnv, timeout: 30_000 }, (err, stdout, stderr) =>
      err ? reject(Object.assign(err, { stdout, stderr })) : resolve(stdout),
    )
  })
}

function recorded(stdout) {
  const last = stdout.trim().split('\n').at(-1)
  return JSON.parse(last)
}

for (const [name, env] of [
  ['memory://', () => ({})],
  ['a redis-server', () => ({ REDIS_URL: server.url })],
]) {
  test(`on ${name}: a span per hold, the waits and the contention recorded`, async () => {
    const out = recorded(await run(env()))
    assert.equal(out.url, name === 'memory://' ? 'memory' : 'redis')
    assert.equal(out.spans.length, 3)
    const fences = out.spans.map((span) => span.attributes['lock.fence'])
    assert.deepEqual([...fences].sort(), fences, 'held one after another, fences increasing')
    for (const span of out.spans) {
      assert.equal(span.name, 'lock.hold')
      assert.equal(span.attributes['lock.key'], 'report')
      assert.equal(span.attributes['lock.api'], 'DistributedLock')
      assert.ok(span.durationMs >= 15, `held ${span.durationMs} ms`)
    }
    assert.equal(out.metrics['lock.wait'].length, 3)
    // The last of three waited for two holds of 20 ms.
    assert.ok(Math.max(...out.metrics['lock.wait']) >= 35, JSON.stringify(out.metrics))
    // At least the second found it held (the third may queue behind it without trying).
    assert.ok(out.metrics['lock.contended'].length >= 1, JSON.stringify(out.metrics))
  })
}

test('without @opentelemetry/api: how to install it, exit 0', async () => {
  const stdout = await run({}, ['--require', HIDE_OTEL])
  assert.match(stdout, /npm install @opentelemetry\/api/)
})
