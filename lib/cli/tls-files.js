'use strict'

// The TLS files the command line takes, named as redis-cli names them: --cacert (the CA that
// signed the servers' certificates, trusted instead of the system's roots), --cert and --key
// (a client certificate, for servers that ask for one: tls-auth-clients). They are read and
// checked before any connection, so a wrong file is a usage error naming the option, not a
// failed handshake on some node later. A refusal names the option and the file's path, never
// what the file holds (a private key).

const fs = require('node:fs')
const tls = require('node:tls')
const { X509Certificate } = require('node:crypto')
const { CliError, EXIT } = require('./errors')

const OPTIONS = ['cacert', 'cert', 'key']
const TLS_SCHEMES = 'rediss://, rediss+sentinel:// or rediss+cluster://'

const usage = (message) => new CliError(EXIT.usage, `${message} (see --help)`)

// More than any certificate chain or key: a larger file (or /dev/zero) is refused unread.
const MAX_BYTES = 1024 * 1024
const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function cannotRead(option, file, err) {
  const why = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'a directory', ELOOP: 'too many symbolic links', ENOTDIR: 'a path through a file' }[err.code] ?? err.code ?? err.message
  return usage(`--${option} ${file}: cannot read it (${why})`)
}

/**
 * The file's bytes, at most MAX_BYTES. Opened without blocking, so a FIFO that no process
 * writes to reads at once as empty instead of hanging; a pipe that is written to (`--key
 * <(cmd)`) is read until its writer ends it, waiting at most `timeoutMs` for more.
 */
async function read(option, file, timeoutMs) {
  if (file === '') throw usage(`--${option} names no file`)
  let fd
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  } catch (err) {
    throw cannotRead(option, file, err)
  }
  const tooBig = () => usage(`--${option} ${file} holds more than 1 MiB: no certificate or key file is that large`)
  try {
    const stat = fs.fstatSync(fd)
    if (stat.isDirectory()) throw usage(`--${option} ${file}: cannot read it (a directory)`)
    if (stat.isFile() && stat.size > MAX_BYTES) throw tooBig()
    const chunks = []
    let total = 0
    const chunk = Buffer.alloc(64 * 1024)
    for (let waitUntil = Date.now() + timeoutMs; ;) {
      let n
      try {
        n = fs.readSync(fd, chunk, 0, chunk.length, null)
      } catch (err) {
        if (err.code !== 'EAGAIN') throw cannotRead(option, file, err)
        // A pipe whose writer has not written yet (or not all).
        if (Date.now() >= waitUntil) throw usage(`--${option} ${file}: nothing more came from it within ${timeoutMs} ms (--timeout)`)
        await sleep(10)
        continue
      }
      if (n === 0) break
      total += n
      if (total > MAX_BYTES) throw tooBig()
      chunks.push(Buffer.from(chunk.subarray(0, n)))
      waitUntil = Date.now() + timeoutMs
    }
    if (total === 0) throw usage(`--${option} ${file} is empty`)
    return Buffer.concat(chunks)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Refuses `pem` unless it holds PEM certificates, each of which parses. node:tls takes only
 * PEM: a DER file would be silently ignored as a CA, or refused later in a way that blames
 * another file. Text around the blocks (openssl's "Bag Attributes") is allowed, as node:tls does.
 */
function certificates(option, file, pem) {
  const blocks = pem.toString('latin1').match(CERTIFICATE_BLOCK) ?? []
  if (blocks.length === 0) throw usage(`--${option} ${file} is not a PEM certificate (no -----BEGIN CERTIFICATE----- block; a DER file must be converted: openssl x509 -inform der)`)
  blocks.forEach((block, i) => {
    usable(option, file, 'a PEM certificate', () => new X509Certificate(block), blocks.length > 1 ? `certificate ${i + 1} of ${blocks.length}: ` : '')
  })
}

/** Runs `check`; an OpenSSL refusal becomes a usage error naming `option` (its reason only). */
function usable(option, file, what, check, which = '') {
  try {
    check()
  } catch (err) {
    throw usage(`--${option} ${file} is not ${what} (${which}${err.code ?? err.message})`)
  }
}

/**
 * The files `values` (the parsed options) name, read: `{ ca, cert, key }` as node:tls takes
 * them (each only when given), or undefined when none is. Every one of `addresses` must be a
 * TLS one: on a plain connection the files would be silently unused. `timeoutMs` bounds the
 * wait for a pipe's next bytes.
 */
async function tlsFiles(values, addresses, timeoutMs) {
  const given = OPTIONS.filter((option) => values[option] !== undefined)
  if (given.length === 0) return undefined
  if (values.cert !== undefined && values.key === undefined) throw usage('--cert needs --key, the private key of the client certificate')
  if (values.key !== undefined && values.cert === undefined) throw usage('--key needs --cert, the client certificate it belongs to')
  const plain = addresses.find((address) => !address.tls)
  if (plain) {
    throw usage(`--${given[0]} is for TLS addresses (${TLS_SCHEMES}), and ${plain.shown} is not one`)
  }
  const files = {}
  if (values.cacert !== undefined) {
    files.ca = await read('cacert', values.cacert, timeoutMs)
    certificates('cacert', values.cacert, files.ca)
  }
  if (values.cert !== undefined) {
    // Each file alone first, so that a refusal of the pair can only be their mismatch.
    files.cert = await read('cert', values.cert, timeoutMs)
    certificates('cert', values.cert, files.cert)
    usable('cert', values.cert, 'a PEM certificate', () => tls.createSecureContext({ cert: files.cert }))
    files.key = await read('key', values.key, timeoutMs)
    usable('key', values.key, 'an unencrypted PEM private key', () => tls.createSecureContext({ key: files.key }))
    usable('key', values.key, `the private key of --cert ${values.cert}`, () => tls.createSecureContext({ cert: files.cert, key: files.key }))
  }
  return files
}

// The handshake's refusals of the server's certificate (node:tls / OpenSSL codes).
const UNTRUSTED = /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_UNTRUSTED|CERT_SIGNATURE_FAILURE)$/

/**
 * Why a TLS connection failed, in words, with what to pass: '' when `err` is no certificate
 * problem. `address.tlsFiles` says which files were given.
 */
function certificateProblem(err, address) {
  const code = err && err.code
  if (typeof code !== 'string') return ''
  const files = address.tlsFiles ?? {}
  if (UNTRUSTED.test(code)) {
    const hint = files.ca ? 'is --cacert the CA that signed it?' : 'pass --cacert <file> with the CA that signed it'
    return `the server's TLS certificate is not trusted (${code}): ${hint}`
  }
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') return `the server's TLS certificate is out of its validity (${code})`
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `the server's TLS certificate does not name the host dialled (${code})`
  const hint = files.cert ? 'is --cert signed by a CA the server trusts?' : 'pass --cert <file> and --key <file>'
  if (/CERTIFICATE_REQUIRED|BAD_CERTIFICATE|UNKNOWN_CA/.test(code)) return `the server refused the client certificate (${code}): ${hint}`
  // TLS 1.2 servers send this one alert for a missing client certificate and for many other
  // disagreements (no common cipher or version): a guess, worded as one.
  if (/HANDSHAKE_FAILURE/.test(code)) return `the TLS handshake failed (${code}): the server may want a client certificate: ${hint}`
  return ''
}

module.exports = { tlsFiles, certificateProblem }
