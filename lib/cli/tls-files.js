'use strict'

// The TLS files the command line takes, named as redis-cli names them: --cacert (the CA that
// signed the servers' certificates, trusted instead of the system's roots), --cert and --key
// (a client certificate, for servers that ask for one: tls-auth-clients). They are read and
// checked before any connection, so a wrong file is a usage error naming the option, not a
// failed handshake on some node later. A refusal names the option and the file's path, never
// what the file holds (a private key).

const tls = require('node:tls')
const { X509Certificate } = require('node:crypto')
const { readBounded } = require('./read-bounded')
const { usage } = require('./errors')

const OPTIONS = ['cacert', 'cert', 'key']
const TLS_SCHEMES = 'rediss://, rediss+sentinel:// or rediss+cluster://'

// The labels OpenSSL reads a certificate under, as node:tls does for --cacert: TRUSTED
// CERTIFICATE is `openssl x509 -trustout`'s, X509 CERTIFICATE an old one.
const CERTIFICATE_LABELS = new Set(['CERTIFICATE', 'TRUSTED CERTIFICATE', 'X509 CERTIFICATE'])
const BEGIN = '-----BEGIN '
const END = '-----END '
const DASHES = '-----'

/** The label of the `BEGIN ` or `END ` line at `at` (`lead` its length), or null: at most 64 characters. */
function labelAt(text, at, lead) {
  const close = text.slice(at + lead.length, at + lead.length + 64 + DASHES.length).indexOf(DASHES)
  if (close < 0) return null
  const label = text.slice(at + lead.length, at + lead.length + close)
  return /^[A-Z0-9 ]+$/.test(label) ? label : null
}

/**
 * The PEM blocks of `text`, in order: `{ label, text, ended }`, `ended` false for a BEGIN line
 * with no END line of its label before the next BEGIN. Each search starts where the last one
 * stopped, so a file of many BEGIN lines and no END is read once (a lazy regex from each BEGIN
 * would read the rest of the file from every one of them).
 */
function pemBlocks(text) {
  const blocks = []
  let at = text.indexOf(BEGIN)
  let end = -2 // the first END line after `at`: -1 when none, -2 before the first search
  while (at >= 0) {
    const label = labelAt(text, at, BEGIN)
    const next = text.indexOf(BEGIN, at + BEGIN.length)
    // Searched again only once passed: an END found ahead of `at` is still the first.
    if (end !== -1 && end < at + BEGIN.length) end = text.indexOf(END, at + BEGIN.length)
    if (label !== null) {
      const closes = end >= 0 && (next < 0 || end < next) && labelAt(text, end, END) === label
      const stop = closes ? end + END.length + label.length + DASHES.length : next < 0 ? text.length : next
      blocks.push({ label, text: text.slice(at, stop), ended: closes })
    }
    at = next
  }
  return blocks
}

/**
 * Refuses `pem` unless it holds PEM certificates, each of which parses. node:tls takes only
 * PEM: a DER file would be silently ignored as a CA, or refused later in a way that blames
 * another file. Text around the blocks (openssl's "Bag Attributes") and blocks of other kinds
 * are allowed, as node:tls does; a certificate block cut short is not.
 */
function certificates(option, file, pem) {
  const text = pem.toString('latin1')
  const blocks = pemBlocks(text).filter((block) => CERTIFICATE_LABELS.has(block.label))
  if (blocks.length === 0) {
    // Only a file with no PEM block at all may be DER; the labels found are not printed, as
    // a file's words are not (it may be a key).
    const why = text.includes(BEGIN)
      ? 'its PEM blocks are of other kinds: a certificate\'s starts -----BEGIN CERTIFICATE-----'
      : 'no -----BEGIN CERTIFICATE----- block; a DER file must be converted: openssl x509 -inform der'
    throw usage(`--${option} ${file} is not a PEM certificate (${why})`)
  }
  blocks.forEach((block, i) => {
    const which = blocks.length > 1 ? `certificate ${i + 1} of ${blocks.length}: ` : ''
    if (!block.ended) throw usage(`--${option} ${file} is not a PEM certificate (${which}no -----END ${block.label}----- line before the next block or the end of the file)`)
    usable(option, file, 'a PEM certificate', () => new X509Certificate(block.text), which)
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
  // TLS 1.2 servers send this one alert for a missing or refused client certificate and for
  // many other disagreements (no common cipher or version): a guess, worded as one, and as
  // a refusal of the one shown when --cert was given.
  if (/HANDSHAKE_FAILURE/.test(code)) {
    const guess = files.cert ? 'the server may have refused the client certificate' : 'the server may want a client certificate'
    return `the TLS handshake failed (${code}): ${guess}: ${hint}`
  }
  return ''
}

module.exports = { tlsFiles, certificateProblem }
