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

function read(option, file) {
  if (file === '') throw usage(`--${option} names no file`)
  try {
    return fs.readFileSync(file)
  } catch (err) {
    const why = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'a directory' }[err.code] ?? err.code ?? err.message
    throw usage(`--${option} ${file}: cannot read it (${why})`)
  }
}

/** Runs `check`; an OpenSSL refusal becomes a usage error naming `option` (its reason only). */
function usable(option, file, what, check) {
  try {
    check()
  } catch (err) {
    throw usage(`--${option} ${file} is not ${what} (${err.code ?? err.message})`)
  }
}

/**
 * The files `values` (the parsed options) name, read: `{ ca, cert, key }` as node:tls takes
 * them (each only when given), or undefined when none is. Every one of `addresses` must be a
 * TLS one: on a plain connection the files would be silently unused.
 */
function tlsFiles(values, addresses) {
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
    files.ca = read('cacert', values.cacert)
    // node:tls ignores a CA file without a certificate: every handshake would then fail.
    usable('cacert', values.cacert, 'a PEM certificate', () => new X509Certificate(files.ca))
  }
  if (values.cert !== undefined) {
    files.cert = read('cert', values.cert)
    files.key = read('key', values.key)
    usable('cert', values.cert, 'a PEM certificate', () => new X509Certificate(files.cert))
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
  if (/CERTIFICATE_REQUIRED|HANDSHAKE_FAILURE|BAD_CERTIFICATE|UNKNOWN_CA/.test(code)) {
    const hint = files.cert ? 'is --cert signed by a CA the server trusts?' : 'pass --cert <file> and --key <file>'
    return `the server refused the client certificate (${code}): ${hint}`
  }
  return ''
}

module.exports = { tlsFiles, certificateProblem }
