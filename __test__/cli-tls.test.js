'use strict'

// The real binary on TLS-only servers whose certificates come from a private CA
// (helpers/tls-certs.js), named with redis-cli's options: --cacert for the CA, --cert and
// --key for a server that asks for a client certificate. What runs where: list, inspect,
// watch and release --force on one server (--cacert); list, inspect and release on a server
// asking for a client certificate; list on a Redlock's three nodes; list, inspect and release
// on a Sentinel set over TLS asking for client certificates (its sentinels and the master they
// name) and on a Redis Cluster over TLS asking for them, reached through one seed (its other
// masters found through the slot table; list and release). watch is run on the single server
// only. Without the CA, or without the client certificate, the command stops with exit code 4
// naming the certificate problem (a TLS 1.2 server's HANDSHAKE_FAILURE only as a possible
// one). The files are checked before any connection (the servers' connection counters do not
// move): a missing, unreadable, empty or over 1 MiB file (/dev/zero), a FIFO with no writer, a
// certificate without its key (or the reverse), a file that is no PEM certificate or key (DER
// included, told apart from a PEM file of other blocks), a certificate block cut short (a
// file of many BEGIN lines and no END refused without reading the rest of the file from each),
// a key not the certificate's, or the options given with a plain address are usage errors
// (exit 2) naming the option, never printing what a key file holds. A CA under OpenSSL's other
// labels (TRUSTED CERTIFICATE, X509 CERTIFICATE) is taken. A pipe that delivers a file
// (`<(cmd)`) is read; one whose writer stays silent, or trickles bytes for ever, is refused
// while its writer still runs (the process ends all the same). Servers are stopped by pid;
// the writers behind pipes by their process group.
const { test, before, after } = require('node:test')
const { spawn, execFileSync } = require('node:child_process')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { makeCerts, startTlsRedis } = require('./helpers/tls-certs')
const { RedisSentinelSet } = require('./helpers/redis-sentinel')
const { RedisCluster } = require('./helpers/redis-cluster')
const { startRedis } = require('./helpers/redis-server')
const { cli, BIN } = require('./helpers/cli')
const { certificateProblem } = require('../lib/cli/tls-files')
const { X509Certificate } = require('node:crypto')
const Redis = require('ioredis')
const { DistributedLock } = require('..')

let certs
let server // TLS, no client certificate asked
let mtls // TLS, a client certificate of the CA required
let third // TLS, a Redlock's third node
let tls12 // TLS 1.2 only, a client certificate required
let plain
let set
let cluster

before(async () => {
  certs = makeCerts()
  server = await startTlsRedis({ certs })
  mtls = await startTlsRedis({ certs, authClients: true })
  third = await startTlsRedis({ certs })
  tls12 = await startTlsRedis({ certs, authClients: true, args: ['--tls-protocols', 'TLSv1.2'] })
  plain = await startRedis()
})

after(async () => {
  await set?.close()
  await cluster?.close()
  await Promise.all([server, mtls, third, tls12, plain].map((s) => s?.close()))
  certs?.cleanup()
})

const caFile = () => certs.caFile
const otherCaFile = () => path.join(certs.dir, 'other-ca.crt')
const clientFiles = () => ['--cert', certs.client.certFile, '--key', certs.client.keyFile]

/** A lock held on `url` with `tls` (Node's options), released after test `t` whatever its end. */
async function held(t, url, tls, key) {
  const handle = await new DistributedLock({ url, tls }).acquire(key, 60_000)
  t.after(() => handle.release().catch(() => {}))
  return handle
}

test('rediss:// with --cacert: list, inspect, watch and release --force', async (t) => {
  const handle = await held(t, server.url, { ca: certs.ca }, 'tls:one')
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

test('a server asking for a client certificate: --cert and --key; without them exit 4 naming it', async (t) => {
  const handle = await held(t, mtls.url, mtls.clientTls, 'tls:mtls')
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

test("a Redlock's nodes over TLS: the files reach each node", async (t) => {
  const nodes = [server.url, mtls.url, third.url]
  const redlock = new DistributedLock(nodes.map((url) => ({ url, tls: mtls.clientTls })))
  const handle = await redlock.acquire('tls:redlock', 60_000)
  t.after(() => handle.release().catch(() => {}))
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
})

test('a TLS 1.2 server refusing the handshake: a client certificate named as a possible cause only', async () => {
  const without = await cli(['list', '--url', tls12.url, '--cacert', caFile()])
  assert.equal(without.code, 4, without.stderr)
  assert.match(without.stderr, /: the TLS handshake failed \([A-Z0-9_]*HANDSHAKE_FAILURE\): the server may want a client certificate: pass --cert <file> and --key <file>\n$/)
  assert.ok(!without.stderr.includes('refused the client certificate'), without.stderr)
  const listed = await cli(['list', '--json', '--url', tls12.url, '--cacert', caFile(), ...clientFiles()])
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(JSON.parse(listed.stdout), [])
})

test('rediss+sentinel:// asking for client certificates: --cacert, --cert and --key reach the sentinels and the master they name', async (t) => {
  set = await RedisSentinelSet.start({ tls: certs, mtls: true })
  const handle = await held(t, set.url, set.clientTls, 'tls:sentinel')
  const files = ['--cacert', caFile(), ...clientFiles()]
  const listed = await cli(['list', 'lock:tls:*', '--json', '--url', set.url, ...files])
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(JSON.parse(listed.stdout).map((r) => r.key), ['lock:tls:sentinel'])
  const inspected = await cli(['inspect', 'lock:tls:sentinel', '--json', '--url', set.url, ...files])
  assert.equal(inspected.code, 0, inspected.stderr)
  assert.equal(JSON.parse(inspected.stdout).holder, `${handle.token.slice(0, 8)}…`)
  const released = await cli(['release', 'lock:tls:sentinel', '--force', '--yes', '--url', set.url, ...files])
  assert.equal(released.code, 0, released.stderr)
  assert.equal(await set.client(await set.masterPort()).exists('lock:tls:sentinel'), 0)

  // Without the CA no sentinel is trusted; without the client certificate each refuses it.
  const none = await cli(['list', '--url', set.url, '--timeout', '2000'])
  assert.equal(none.code, 4, none.stderr)
  assert.match(none.stderr, /no sentinel of rediss\+sentinel:\/\/.* named a reachable master "mymaster" \(.*the server's TLS certificate is not trusted/)
  const noCert = await cli(['list', '--url', set.url, '--timeout', '2000', '--cacert', caFile()])
  assert.equal(noCert.code, 4, noCert.stderr)
  assert.match(noCert.stderr, /no sentinel of rediss\+sentinel:\/\/.* named a reachable master "mymaster" \(.*the server refused the client certificate/)
})

test('rediss+cluster:// asking for client certificates, one seed: every master reached through the slot table', async (t) => {
  cluster = await RedisCluster.start({ masters: 3, replicas: 0, tls: certs, mtls: true })
  const ports = await cluster.masterPorts()
  assert.equal(ports.length, 3)
  const keys = []
  for (const port of ports) keys.push([port, await cluster.keyOn(port, 'tls:cluster:', 'lock:')])
  const locks = new DistributedLock({ url: cluster.url, tls: { ca: certs.ca, cert: certs.client.cert, key: certs.client.key } })
  const handles = await Promise.all(keys.map(([, key]) => locks.acquire(key, 60_000)))
  t.after(() => Promise.all(handles.map((h) => h.release().catch(() => {}))))
  // One seed: the other masters are known only from its CLUSTER SLOTS.
  const seed = `rediss+cluster://127.0.0.1:${ports[0]}`
  const files = ['--cacert', caFile(), ...clientFiles()]
  const listed = await cli(['list', 'lock:tls:cluster:*', '--json', '--url', seed, ...files])
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(JSON.parse(listed.stdout).map((r) => r.key).sort(), keys.map(([, key]) => `lock:${key}`).sort())
  // The key released lives on a master other than the seed, which answers for it: the release
  // must find it through the seed's slot table (a master not serving its slot answers MOVED).
  const other = keys.findIndex(([p]) => p !== ports[0])
  const [port, key] = keys[other]
  assert.equal(await cluster.command(port, 'GET', `lock:${key}`), handles[other].token)
  const released = await cli(['release', `lock:${key}`, '--force', '--yes', '--url', seed, ...files])
  assert.equal(released.code, 0, released.stderr)
  assert.equal(await cluster.command(port, 'EXISTS', `lock:${key}`), 0)
  const none = await cli(['list', '--url', seed])
  assert.equal(none.code, 4, none.stderr)
  assert.match(none.stderr, /no node of rediss\+cluster:\/\/.* answered CLUSTER SLOTS \(.*the server's TLS certificate is not trusted/)
  const noCert = await cli(['list', '--url', seed, '--cacert', caFile()])
  assert.equal(noCert.code, 4, noCert.stderr)
  assert.match(noCert.stderr, /no node of rediss\+cluster:\/\/.* answered CLUSTER SLOTS \(.*the server refused the client certificate/)
})

/** INFO stats total_connections_received of the server `client` is connected to. */
async function connectionsReceived(client) {
  return Number(/total_connections_received:(\d+)/.exec(await client.info('stats'))[1])
}

test('usage errors, before any connection: exit 2 naming the option, no key content printed', async (t) => {
  const dir = fs.mkdtempSync(path.join(certs.dir, 'bad-'))
  const notPem = path.join(dir, 'not.pem')
  fs.writeFileSync(notPem, 'hello\n')
  const empty = path.join(dir, 'empty.pem')
  fs.writeFileSync(empty, '')
  const missing = path.join(dir, 'missing.pem')
  const loop = path.join(dir, 'loop.pem')
  fs.symlinkSync(loop, loop)
  const big = path.join(dir, 'big.pem')
  fs.writeFileSync(big, certs.ca.repeat(Math.ceil((1024 * 1024 + 1) / certs.ca.length)))
  const fifo = path.join(dir, 'fifo.pem')
  execFileSync('mkfifo', [fifo])
  // DER forms of the CA and the client certificate: node:crypto parses them, node:tls would not.
  const derCa = path.join(dir, 'ca.der')
  fs.writeFileSync(derCa, new X509Certificate(certs.ca).raw)
  const derCert = path.join(dir, 'client.der')
  fs.writeFileSync(derCert, new X509Certificate(certs.client.cert).raw)
  const brokenBlock = path.join(dir, 'broken.pem')
  fs.writeFileSync(brokenBlock, `${certs.ca}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`)
  // The CA with its last lines lost, and a file just under 1 MiB of BEGIN lines and no END.
  const cutShort = path.join(dir, 'cut.pem')
  fs.writeFileSync(cutShort, certs.ca.slice(0, certs.ca.indexOf('-----END')))
  const begins = path.join(dir, 'begins.pem')
  fs.writeFileSync(begins, '-----BEGIN CERTIFICATE-----\n'.repeat(37_000))
  const keyFiles = [certs.client, certs.otherClient]
  const url = `rediss://127.0.0.1:${server.port}`
  const cases = [
    [['--cacert', missing], new RegExp(`^--cacert ${missing}: cannot read it \\(no such file\\)`)],
    [['--cacert', dir], /^--cacert \S+: cannot read it \(a directory\)/],
    // A path that fails to open for another reason than a missing file (a mode of 000 does not
    // stop root, who may run this).
    [['--cacert', loop], /^--cacert \S+: cannot read it \(too many symbolic links\)/],
    [['--cacert', empty], /^--cacert \S+ is empty/],
    [['--cacert', fifo], /^--cacert \S+ is empty/],
    [['--cacert', '/dev/zero'], /^--cacert \/dev\/zero holds more than 1 MiB/],
    [['--cacert', big], /^--cacert \S+ holds more than 1 MiB/],
    [['--cacert', notPem], /^--cacert \S+ is not a PEM certificate \(no -----BEGIN CERTIFICATE----- block; a DER file must be converted/],
    [['--cacert', derCa], /^--cacert \S+ is not a PEM certificate \(no -----BEGIN CERTIFICATE----- block/],
    // PEM, but a key: not told it may be DER.
    [['--cacert', certs.client.keyFile], /^--cacert \S+ is not a PEM certificate \(its PEM blocks are of other kinds: a certificate's starts -----BEGIN CERTIFICATE-----\)/],
    [['--cacert', cutShort], /^--cacert \S+ is not a PEM certificate \(no -----END CERTIFICATE----- line before the next block or the end of the file\)/],
    [['--cacert', begins], /^--cacert \S+ is not a PEM certificate \(certificate 1 of 37000: no -----END CERTIFICATE----- line/],
    [['--cacert', brokenBlock], /^--cacert \S+ is not a PEM certificate \(certificate 2 of 2: ERR_OSSL_[A-Z0-9_]+\)/],
    [['--cert', certs.client.certFile], /^--cert needs --key/],
    [['--key', certs.client.keyFile], /^--key needs --cert/],
    [['--cert', notPem, '--key', certs.client.keyFile], /^--cert \S+ is not a PEM certificate/],
    // A DER certificate with its own (good) key: the certificate is blamed, not the key.
    [['--cert', derCert, '--key', certs.client.keyFile], /^--cert \S+client\.der is not a PEM certificate \(no -----BEGIN CERTIFICATE----- block/],
    [['--cert', certs.client.certFile, '--key', notPem], /^--key \S+ is not an unencrypted PEM private key/],
    [['--cert', certs.client.certFile, '--key', '/dev/zero'], /^--key \/dev\/zero holds more than 1 MiB/],
    [['--cert', certs.client.certFile, '--key', certs.otherClient.keyFile], /^--key \S+ is not the private key of --cert \S+ \(ERR_OSSL_X509_KEY_VALUES_MISMATCH\)/],
    [['--cacert', certs.caFile], /^--cacert is for TLS addresses \(rediss:\/\/, rediss\+sentinel:\/\/ or rediss\+cluster:\/\/\), and redis:\/\/127\.0\.0\.1:\d+\/? is not one/, plain.url],
    [['--cert', certs.client.certFile, '--key', certs.client.keyFile], /^--cert is for TLS addresses/, `redis+sentinel://127.0.0.1:${plain.port}/mymaster`],
  ]
  // Connected before the cases: the counters then count only what the commands would open.
  const onServer = new Redis({ port: server.port, host: '127.0.0.1', tls: { ca: certs.ca } })
  const onPlain = new Redis({ port: plain.port, host: '127.0.0.1' })
  t.after(() => Promise.all([onServer.quit(), onPlain.quit()]))
  const before = [await connectionsReceived(onServer), await connectionsReceived(onPlain)]
  for (const command of [['list'], ['inspect', 'lock:x'], ['watch', '--count', '1'], ['release', 'lock:x', '--force', '--yes']]) {
    for (const [options, message, at = url] of cases) {
      const { code, stdout, stderr } = await cli([...command, '--url', at, ...options])
      const what = `${command[0]} ${options.join(' ')}`
      assert.equal(code, 2, `${what}: ${stderr}`)
      assert.equal(stdout, '', what)
      assert.match(stderr.replace(/^native-redis-lock: /, ''), message, what)
      assert.match(stderr, /\(see --help\)\n$/, what)
      assert.ok(!stderr.includes('PRIVATE KEY'), `${what}: ${stderr}`)
      for (const { key } of keyFiles) {
        for (const line of key.split('\n').filter((l) => l && !l.startsWith('-----'))) assert.ok(!stderr.includes(line), `${what}: ${stderr}`)
      }
    }
  }
  assert.deepEqual([await connectionsReceived(onServer), await connectionsReceived(onPlain)], before, 'a usage error opened a connection')
})

/** Whether any process of group `pgid` still runs. */
function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * Runs the binary under bash with `script` after it (process substitution), bash replaced by
 * the binary (`exec`) in a process group of its own, with the pipes' writers: `{ code, stdout,
 * stderr, writersLeft }`, `writersLeft` whether any writer still ran when the binary ended.
 * The group is then killed (by its id), writers included; so is it, binary and all, after 30 s.
 */
function viaBash(args, script) {
  const quoted = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ')
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', `exec ${quoted} ${script}`], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => { stdout += chunk })
    child.stderr.on('data', (chunk) => { stderr += chunk })
    const endGroup = () => {
      try {
        process.kill(-child.pid, 'SIGKILL')
      } catch {}
    }
    const limit = setTimeout(endGroup, 30_000)
    let writersLeft
    child.on('exit', () => {
      writersLeft = groupAlive(child.pid)
      endGroup()
    })
    child.on('close', (code) => {
      clearTimeout(limit)
      resolve({ code: code ?? 1, stdout, stderr, writersLeft })
    })
  })
}

test('files from pipes (<(cmd)): read when the writer delivers, even late; refused when it does not within --timeout', async () => {
  const late = (file) => `<(sleep 0.3; cat '${file}')`
  const listed = await viaBash(['list', '--json', '--url', mtls.url], `--cacert ${late(caFile())} --cert ${late(certs.client.certFile)} --key ${late(certs.client.keyFile)}`)
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(JSON.parse(listed.stdout), [])
  // A writer that stays silent far longer than the test: the command ends without it.
  const silent = await viaBash(['list', '--url', server.url, '--timeout', '500'], '--cacert <(exec sleep 60)')
  assert.equal(silent.code, 2, silent.stderr)
  assert.match(silent.stderr, /--cacert \/dev\/fd\/\d+: nothing more came from it within 500 ms \(--timeout\)/)
  assert.equal(silent.writersLeft, true, 'the writer ended before the command: its end, not the refusal, may have ended it')
})

test('a pipe that trickles bytes for ever: refused after 3 x --timeout in all', async () => {
  // A byte every 100 ms, never an end: each gap well within --timeout. The writer ignores
  // SIGPIPE so that it outlives the command's end, as the silent one does.
  const trickle = await viaBash(['list', '--url', server.url, '--timeout', '1000'], "--cacert <(trap '' PIPE; while :; do printf x 2>/dev/null; sleep 0.1; done)")
  assert.equal(trickle.code, 2, trickle.stderr)
  assert.match(trickle.stderr, /--cacert \/dev\/fd\/\d+: not ended within 3000 ms \(3 × --timeout\)/)
  assert.equal(trickle.writersLeft, true)
})

test("a CA under OpenSSL's other labels (TRUSTED CERTIFICATE, X509 CERTIFICATE) is taken", async () => {
  const dir = fs.mkdtempSync(path.join(certs.dir, 'labels-'))
  const trusted = path.join(dir, 'trusted.crt')
  execFileSync('openssl', ['x509', '-in', caFile(), '-trustout', '-out', trusted])
  assert.match(fs.readFileSync(trusted, 'latin1'), /^-----BEGIN TRUSTED CERTIFICATE-----\n/)
  const x509 = path.join(dir, 'x509.crt')
  fs.writeFileSync(x509, certs.ca.replace(/(BEGIN|END) CERTIFICATE/g, '$1 X509 CERTIFICATE'))
  for (const file of [trusted, x509]) {
    const listed = await cli(['list', '--json', '--url', server.url, '--cacert', file])
    assert.equal(listed.code, 0, `${file}: ${listed.stderr}`)
    assert.deepEqual(JSON.parse(listed.stdout), [])
  }
})

test('a bare HANDSHAKE_FAILURE is a guess: a missing client certificate, or with --cert its refusal', () => {
  const err = { code: 'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE' }
  assert.equal(certificateProblem(err, { tlsFiles: { ca: 'x' } }),
    'the TLS handshake failed (ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE): the server may want a client certificate: pass --cert <file> and --key <file>')
  assert.equal(certificateProblem(err, { tlsFiles: { ca: 'x', cert: 'y', key: 'z' } }),
    'the TLS handshake failed (ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE): the server may have refused the client certificate: is --cert signed by a CA the server trusts?')
})

test('--help names the TLS options', async () => {
  const { code, stdout } = await cli(['--help'])
  assert.equal(code, 0)
  for (const option of ['--cacert <file>', '--cert <file>', '--key <file>']) assert.ok(stdout.includes(option), option)
})
