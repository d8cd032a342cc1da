'use strict'

// The real binary on TLS-only servers whose certificates come from a private CA
// (helpers/tls-certs.js), named with redis-cli's options: --cacert for the CA, --cert and
// --key for a server that asks for a client certificate. list, inspect, watch and release
// --force reach one server, a Redlock's nodes (each given the files), a Sentinel set over TLS
// (the sentinels and the master they name) and a Redis Cluster over TLS (seeds and masters). Without the CA, or without the client certificate, the
// command stops with exit code 4 naming the certificate problem. The files are checked before
// any connection: a missing or unreadable file, a certificate without its key (or the
// reverse), a file that is no certificate or key, or the options given with a plain address
// are usage errors (exit 2) naming the option, never printing what a key file holds.
// Servers are stopped by pid.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { makeCerts, startTlsRedis } = require('./helpers/tls-certs')
const { RedisSentinelSet } = require('./helpers/redis-sentinel')
const { RedisCluster } = require('./helpers/redis-cluster')
const { startRedis } = require('./helpers/redis-server')
const { cli } = require('./helpers/cli')
const { DistributedLock } = require('..')

let certs
let server // TLS, no client certificate asked
let mtls // TLS, a client certificate of the CA required
let third // TLS, a Redlock's third node
let plain
let set
let cluster

before(async () => {
  certs = makeCerts()
  server = await startTlsRedis({ certs })
  mtls = await startTlsRedis({ certs, authClients: true })
  third = await startTlsRedis({ certs })
  plain = await startRedis()
})

after(async () => {
  await set?.close()
  await cluster?.close()
  await Promise.all([server, mtls, third, plain].map((s) => s?.close()))
  certs?.cleanup()
})

const caFile = () => certs.caFile
const otherCaFile = () => path.join(certs.dir, 'other-ca.crt')
const clientFiles = () => ['--cert', certs.client.certFile, '--key', certs.client.keyFile]

/** A lock held on `url` with `tls` (Node's options) for the test's time. */
async function held(url, tls, key) {
  const locks = new DistributedLock({ url, tls })
  return locks.acquire(key, 60_000)
}

test('rediss:// with --cacert: list, inspect, watch and release --force', async () => {
  const handle = await held(server.url, { ca: certs.ca }, 'tls:one')
  const listed = await cli(['list', 'lock:tls:*', '--json', '--url', server.url, '--cacert', caFile()])
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(JSON.parse(listed.stdout).map((r) => [r.key, r.api]), [['lock:tls:one', 'distributed-lock']])

  const inspected = await cli(['inspect', 'lock:tls:one', '--json', '--url', server.url, '--cacert', caFile()])
  assert.equal(inspected.code, 0, inspected.stderr)
  assert.equal(JSON.parse(inspected.stdout).holder, `${handle.token.slice(0, 8)}…`)

  const watched = await cli(['watch', 'lock:tls:*', '--json', '--count', '1', '--url', server.url, '--cacert', caFile()])
  assert.equal(watched.code, 0, watched.stderr)
  assert.ok(watched.stdout.includes('"lock:tls:one"'), watched.stdout)

  const released = await cli(['release', 'lock:tls:one', '--force', '--yes', '--json', '--url', server.url, '--cacert', caFile()])
  assert.equal(released.code, 0, released.stderr)
  assert.equal(JSON.parse(released.stdout).released, 'lock:tls:one')
  assert.equal(await new DistributedLock({ url: server.url, tls: { ca: certs.ca } }).isLocked('tls:one'), false)
})

test('without --cacert, or with another CA: exit 4 naming the untrusted certificate', async () => {
  const none = await cli(['list', '--url', server.url])
  assert.equal(none.code, 4, none.stderr)
  assert.match(none.stderr, /^native-redis-lock: cannot reach Redis at rediss:\/\/127\.0\.0\.1:\d+\/?: the server's TLS certificate is not trusted \([A-Z_]+\): pass --cacert <file> with the CA that signed it\n$/)

  const other = await cli(['list', '--url', server.url, '--cacert', otherCaFile()])
  assert.equal(other.code, 4, other.stderr)
  assert.match(other.stderr, /the server's TLS certificate is not trusted \([A-Z_]+\): is --cacert the CA that signed it\?\n$/)
})

test('a server asking for a client certificate: --cert and --key; without them exit 4 naming it', async () => {
  const handle = await held(mtls.url, mtls.clientTls, 'tls:mtls')
  const listed = await cli(['list', 'lock:tls:*', '--json', '--url', mtls.url, '--cacert', caFile(), ...clientFiles()])
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(JSON.parse(listed.stdout).map((r) => r.key), ['lock:tls:mtls'])
  const inspected = await cli(['inspect', 'lock:tls:mtls', '--url', mtls.url, '--cacert', caFile(), ...clientFiles()])
  assert.equal(inspected.code, 0, inspected.stderr)
  assert.match(inspected.stdout, new RegExp(`holder: +${handle.token.slice(0, 8)}…`))

  const without = await cli(['list', '--url', mtls.url, '--cacert', caFile()])
  assert.equal(without.code, 4, without.stderr)
  assert.match(without.stderr, /the server refused the client certificate \([A-Z0-9_]+\): pass --cert <file> and --key <file>\n$/)

  const stranger = ['--cert', certs.otherClient.certFile, '--key', certs.otherClient.keyFile]
  const refused = await cli(['list', '--url', mtls.url, '--cacert', caFile(), ...stranger])
  assert.equal(refused.code, 4, refused.stderr)
  assert.match(refused.stderr, /the server refused the client certificate \([A-Z0-9_]+\): is --cert signed by a CA the server trusts\?\n$/)

  const released = await cli(['release', 'lock:tls:mtls', '--force', '--yes', '--url', mtls.url, '--cacert', caFile(), ...clientFiles()])
  assert.equal(released.code, 0, released.stderr)
  assert.equal(await new DistributedLock({ url: mtls.url, tls: mtls.clientTls }).isLocked('tls:mtls'), false)
})

test("a Redlock's nodes over TLS: the files reach each node", async () => {
  const nodes = [server.url, mtls.url, third.url]
  const redlock = new DistributedLock(nodes.map((url) => ({ url, tls: mtls.clientTls })))
  const handle = await redlock.acquire('tls:redlock', 60_000)
  try {
    const urls = nodes.flatMap((url) => ['--url', url])
    const listed = await cli(['list', 'lock:tls:redlock', '--json', ...urls, '--cacert', caFile(), ...clientFiles()])
    assert.equal(listed.code, 0, listed.stderr)
    const rows = JSON.parse(listed.stdout)
    assert.deepEqual(rows.map((r) => r.node.replace(/\/$/, '')).sort(), [...nodes].sort())
    assert.ok(rows.every((r) => r.holder === `${handle.token.slice(0, 8)}…`), listed.stdout)
    // The node that asks for a client certificate is named when it is not shown one.
    const without = await cli(['list', ...urls, '--cacert', caFile()])
    assert.equal(without.code, 4, without.stderr)
    assert.match(without.stderr, new RegExp(`cannot reach Redis at rediss://127\\.0\\.0\\.1:${mtls.port}/?: the server refused the client certificate`))
  } finally {
    await handle.release()
  }
})

test('rediss+sentinel:// with --cacert: the sentinels and the master they name', async () => {
  set = await RedisSentinelSet.start({ tls: certs })
  const handle = await held(set.url, { ca: certs.ca }, 'tls:sentinel')
  const listed = await cli(['list', 'lock:tls:*', '--json', '--url', set.url, '--cacert', caFile()])
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(JSON.parse(listed.stdout).map((r) => r.key), ['lock:tls:sentinel'])
  const inspected = await cli(['inspect', 'lock:tls:sentinel', '--json', '--url', set.url, '--cacert', caFile()])
  assert.equal(inspected.code, 0, inspected.stderr)
  assert.equal(JSON.parse(inspected.stdout).holder, `${handle.token.slice(0, 8)}…`)
  const released = await cli(['release', 'lock:tls:sentinel', '--force', '--yes', '--url', set.url, '--cacert', caFile()])
  assert.equal(released.code, 0, released.stderr)
  assert.equal(await set.client(await set.masterPort()).exists('lock:tls:sentinel'), 0)

  // Without the CA no sentinel is trusted: exit 4, each sentinel's refusal named.
  const none = await cli(['list', '--url', set.url, '--timeout', '2000'])
  assert.equal(none.code, 4, none.stderr)
  assert.match(none.stderr, /no sentinel of rediss\+sentinel:\/\/.* named a reachable master "mymaster" \(.*the server's TLS certificate is not trusted/)
})

test('rediss+cluster:// with --cacert: the seeds and every master', async () => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 0, tls: certs })
  const ports = await cluster.masterPorts()
  const keys = []
  for (const port of ports) keys.push([port, await cluster.keyOn(port, 'tls:cluster:', 'lock:')])
  const locks = new DistributedLock({ url: cluster.url, tls: { ca: certs.ca } })
  const handles = await Promise.all(keys.map(([, key]) => locks.acquire(key, 60_000)))
  try {
    const listed = await cli(['list', 'lock:tls:cluster:*', '--json', '--url', cluster.url, '--cacert', caFile()])
    assert.equal(listed.code, 0, listed.stderr)
    assert.deepEqual(JSON.parse(listed.stdout).map((r) => r.key).sort(), keys.map(([, key]) => `lock:${key}`).sort())
    const [port, key] = keys[keys.length - 1]
    const released = await cli(['release', `lock:${key}`, '--force', '--yes', '--url', cluster.url, '--cacert', caFile()])
    assert.equal(released.code, 0, released.stderr)
    assert.equal(await cluster.command(port, 'EXISTS', `lock:${key}`), 0)
    const none = await cli(['list', '--url', cluster.url])
    assert.equal(none.code, 4, none.stderr)
    assert.match(none.stderr, /no node of rediss\+cluster:\/\/.* answered CLUSTER SLOTS \(.*the server's TLS certificate is not trusted/)
  } finally {
    await Promise.all(handles.map((h) => h.release().catch(() => {})))
  }
})

test('usage errors, before any connection: exit 2 naming the option, no key content printed', async () => {
  const dir = fs.mkdtempSync(path.join(certs.dir, 'bad-'))
  const unreadable = path.join(dir, 'unreadable.pem')
  fs.writeFileSync(unreadable, certs.ca)
  fs.chmodSync(unreadable, 0o000)
  const notPem = path.join(dir, 'not.pem')
  fs.writeFileSync(notPem, 'hello\n')
  const missing = path.join(dir, 'missing.pem')
  // A command that got as far as connecting would end with 0, 4 or 5, never 2.
  const url = `rediss://127.0.0.1:${server.port}`
  const cases = [
    [['--cacert', missing], new RegExp(`^--cacert ${missing}: cannot read it \\(no such file\\)`)],
    [['--cacert', dir], /^--cacert \S+: cannot read it \(a directory\)/],
    [['--cacert', notPem], /^--cacert \S+ is not a PEM certificate \(ERR_OSSL_PEM_NO_START_LINE\)/],
    [['--cert', certs.client.certFile], /^--cert needs --key/],
    [['--key', certs.client.keyFile], /^--key needs --cert/],
    [['--cert', notPem, '--key', certs.client.keyFile], /^--cert \S+ is not a PEM certificate/],
    [['--cert', certs.client.certFile, '--key', notPem], /^--key \S+ is not an unencrypted PEM private key/],
    [['--cert', certs.client.certFile, '--key', certs.otherClient.keyFile], /^--key \S+ is not the private key of --cert \S+ \(ERR_OSSL_X509_KEY_VALUES_MISMATCH\)/],
    [['--cacert', certs.caFile], /^--cacert is for TLS addresses \(rediss:\/\/, rediss\+sentinel:\/\/ or rediss\+cluster:\/\/\), and redis:\/\/127\.0\.0\.1:\d+\/? is not one/, plain.url],
    [['--cert', certs.client.certFile, '--key', certs.client.keyFile], /^--cert is for TLS addresses/, `redis+sentinel://127.0.0.1:${plain.port}/mymaster`],
  ]
  // Run as root, a mode of 000 does not stop a read: that case is left out then.
  if (process.getuid?.() !== 0) cases.push([['--cacert', unreadable], /^--cacert \S+: cannot read it \(permission denied\)/])
  for (const command of [['list'], ['inspect', 'lock:x'], ['watch', '--count', '1'], ['release', 'lock:x', '--force', '--yes']]) {
    for (const [options, message, at = url] of cases) {
      const { code, stdout, stderr } = await cli([...command, '--url', at, ...options])
      const what = `${command[0]} ${options.join(' ')}`
      assert.equal(code, 2, `${what}: ${stderr}`)
      assert.equal(stdout, '', what)
      assert.match(stderr.replace(/^native-redis-lock: /, ''), message, what)
      assert.match(stderr, /\(see --help\)\n$/, what)
      assert.ok(!stderr.includes('PRIVATE KEY') && !stderr.includes(certs.client.key.split('\n')[1]), `${what}: ${stderr}`)
    }
  }
})

test('--help names the TLS options', async () => {
  const { code, stdout } = await cli(['--help'])
  assert.equal(code, 0)
  for (const option of ['--cacert <file>', '--cert <file>', '--key <file>']) assert.ok(stdout.includes(option), option)
})
