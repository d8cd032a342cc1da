'use strict'

// The TLS files the command line takes, named as redis-cli names them: --cacert (the CA that
// signed the servers' certificates, trusted instead of the system's roots), --cert and --key
// (a client certificate, for servers that ask for one: tls-auth-clients). They are read and
// checked before any connection, so a wrong file is a usage error naming the option, not a
// failed handshake on some node later. A refusal names the option and the file's path, never
// what the file holds (a private key).

const tls = require('node:tls')
const { X509Certificate } = require('node:crypto')
const { readBounded, usage } = require('./read-bounded')

const OPTIONS = ['cacert', 'cert', 'key']
const TLS_SCHEMES = 'rediss://, rediss+sentinel:// or rediss+cluster://'

const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g

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
 * wait for a pipe's next bytes (and three times it, its whole reading: see read-bounded.js).
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
    files.ca = await readBounded('cacert', values.cacert, timeoutMs)
    certificates('cacert', values.cacert, files.ca)
  }
  if (values.cert !== undefined) {
    // Each file alone first, so that a refusal of the pair can only be their mismatch.
    files.cert = await readBounded('cert', values.cert, timeoutMs)
    certificates('cert', values.cert, files.cert)
    usable('cert', values.cert, 'a PEM certificate', () => tls.createSecureContext({ cert: files.cert }))
    files.key = await readBounded('key', values.key, timeoutMs)
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
