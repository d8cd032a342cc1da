'use strict'

// Throwaway TLS material made with the openssl CLI, and a private TLS-only redis-server
// (`--port 0 --tls-port N`) for one test file. Nothing here is reused across runs: the
// certificates live in a temp dir that `cleanup()` / `close()` remove. A missing openssl or a
// redis-server built without TLS fails loudly.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const tls = require('node:tls')
const { RedisServer } = require('./redis-server')

function openssl(args, cwd) {
  try {
    return execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
  } catch (err) {
    if (err.code === 'ENOENT') {
      throw new Error('openssl is not installed: the TLS tests need the openssl CLI (apt-get install openssl)')
    }
    throw new Error(`openssl ${args.join(' ')} failed: ${err.stderr || err.message}`)
  }
}

/** An EC P-256 key and a certificate for it, signed by `issuer` (or self-signed as a CA). */
function issue(dir, name, { subject, issuer, ca = false, san, usage }) {
  const key = path.join(dir, `${name}.key`)
  const cert = path.join(dir, `${name}.crt`)
  const ext = path.join(dir, `${name}.ext`)
  const lines = ca
    ? ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign', 'subjectKeyIdentifier=hash']
    : [
        'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature',
        `extendedKeyUsage=${usage}`,
        'subjectKeyIdentifier=hash',
        'authorityKeyIdentifier=keyid',
        ...(san ? [`subjectAltName=${san}`] : []),
      ]
  fs.writeFileSync(ext, `${lines.join('\n')}\n`)
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key], dir)
  if (ca) {
    openssl(['req', '-x509', '-new', '-key', key, '-subj', subject, '-days', '2', '-sha256',
      '-extensions', 'v3', '-config', writeConfig(dir, name, lines), '-out', cert], dir)
  } else {
    const csr = path.join(dir, `${name}.csr`)
    openssl(['req', '-new', '-key', key, '-subj', subject, '-out', csr], dir)
    openssl(['x509', '-req', '-in', csr, '-CA', issuer.certFile, '-CAkey', issuer.keyFile, '-CAcreateserial',
      '-days', '2', '-sha256', '-extfile', ext, '-out', cert], dir)
  }
  return {
    certFile: cert,
    keyFile: key,
    cert: fs.readFileSync(cert, 'utf8'),
    key: fs.readFileSync(key, 'utf8'),
  }
}

function writeConfig(dir, name, lines) {
  const file = path.join(dir, `${name}.cnf`)
  fs.writeFileSync(file, ['[req]', 'distinguished_name=dn', '[dn]', '[v3]', ...lines, ''].join('\n'))
  return file
}

/**
 * A CA with a server certificate (SAN 127.0.0.1 and localhost) and a client certificate, and
 * an unrelated second CA with its own client certificate. Every `*.key` / `*.cert` / `*.ca`
 * is a PEM string; `*File` the path on disk.
 */
function makeCerts() {
  openssl(['version'])
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nrl-tls-'))
  const ca = issue(dir, 'ca', { subject: '/CN=native-redis-lock test CA', ca: true })
  const server = issue(dir, 'server', {
    subject: '/CN=localhost',
    issuer: ca,
    san: 'IP:127.0.0.1,DNS:localhost',
    usage: 'serverAuth',
  })
  const client = issue(dir, 'client', { subject: '/CN=locker', issuer: ca, usage: 'clientAuth' })
  const otherCa = issue(dir, 'other-ca', { subject: '/CN=some other CA', ca: true })
  const otherClient = issue(dir, 'other-client', { subject: '/CN=stranger', issuer: otherCa, usage: 'clientAuth' })
  return {
    dir,
    ca: ca.cert,
    caFile: ca.certFile,
    server,
    client,
    otherCa: otherCa.cert,
    otherClient,
    cleanup() {
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** Resolves once the server answers PING over TLS (or asks for AUTH). */
async function waitUntilTlsReady(port, tlsOptions, child, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs
  let last = 'no answer'
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server exited before it was ready (code ${child.exitCode}); is it built with TLS?`)
    }
    const ok = await new Promise((resolve) => {
      const socket = tls.connect({ host: '127.0.0.1', port, ...tlsOptions })
      socket.setTimeout(500)
      socket.once('secureConnect', () => socket.write('PING\r\n'))
      socket.once('data', (data) => {
        socket.destroy()
        last = data.toString().trim()
        resolve(/^(\+PONG|-NOAUTH)/.test(last))
      })
      socket.once('error', (err) => {
        last = err.message
        socket.destroy()
        resolve(false)
      })
      socket.once('timeout', () => {
        socket.destroy()
        resolve(false)
      })
    })
    if (ok) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`TLS redis-server on port ${port} did not become ready: ${last}`)
}

/** A redis-server that speaks TLS only: no plain-text port at all. */
class TlsRedisServer extends RedisServer {
  constructor({ certs, authClients = false, args = [], password }) {
    super({ args, password })
    this.certs = certs
    this.authClients = authClients
  }

  get url() {
    const auth = this.password ? `:${encodeURIComponent(this.password)}@` : ''
    return `rediss://${auth}127.0.0.1:${this.port}`
  }

  /** Node tls options an admin client needs (with the client certificate when required). */
  get clientTls() {
    const options = { ca: this.certs.ca }
    if (this.authClients) Object.assign(options, { cert: this.certs.client.cert, key: this.certs.client.key })
    return options
  }

  listenArgs() {
    const { server, caFile } = this.certs
    return [
      '--port', '0',
      '--tls-port', String(this.port),
      '--bind', '127.0.0.1',
      '--tls-cert-file', server.certFile,
      '--tls-key-file', server.keyFile,
      '--tls-ca-cert-file', caFile,
      '--tls-auth-clients', this.authClients ? 'yes' : 'no',
    ]
  }

  waitReady() {
    return waitUntilTlsReady(this.port, this.clientTls, this.child)
  }
}

/** Starts a TLS-only server; the caller closes it (`after(() => server.close())`). */
async function startTlsRedis(options) {
  return new TlsRedisServer(options).start()
}

module.exports = { makeCerts, startTlsRedis, TlsRedisServer, waitUntilTlsReady }
