'use strict'

// The command line's failures: each kind with its own exit code (printed by --help, listed in
// the README).

class CliError extends Error {
  constructor(code, message) {
    super(message)
    this.exitCode = code
  }
}

const EXIT = Object.freeze({
  ok: 0,
  failed: 1,
  usage: 2,
  badUrl: 3,
  unreachable: 4,
  notFound: 5,
  refused: 6,
})

/** A usage error (exit 2): bad command, option, pattern or TLS file. */
const usage = (message) => new CliError(EXIT.usage, `${message} (see --help)`)

function badUrl(message) {
  return new CliError(EXIT.badUrl, message)
}

/** One percent-encoded part of a URL; `what` names it in the refusal (never its value). */
function decodeUrlPart(part, what) {
  try {
    return decodeURIComponent(part)
  } catch {
    throw badUrl(`the URL's ${what} is not valid percent-encoding`)
  }
}

module.exports = { CliError, EXIT, usage, badUrl, decodeUrlPart }
