'use strict'

// The command line: parses arguments, asks lib/cli/locks.js or watch.js, prints. Each kind of
// failure has its own exit code (EXIT), printed by --help and listed in the README.

const { parseArgs } = require('node:util')
const readline = require('node:readline')
const { parseAddress, splitUrls, CliError, EXIT, SEVERAL_SERVERS } = require('./address')
const { usage, badUrl } = require('./errors')
const { connect } = require('./connect')
const { tlsFiles } = require('./tls-files')
const { listLocks, inspectLock, forceRelease } = require('./locks')
const { watch } = require('./watch')

const HELP = {
  main: `Usage: native-redis-lock <command> [options]

Commands:
  list [pattern]          every lock of every API (SCAN), key pattern default *
  inspect <key>           one lock in full: holder, TTL, fence counter, queue
  watch [pattern]         live table of locks: acquisitions, hand-overs, wake-ups per second
  release <key> --force   delete a stuck lock and move its fence counter on

Options (every command):
  --url <url>             redis://, rediss://, unix://, redis+sentinel://h:p,h:p/<name>
                          or redis+cluster://h:p,h:p address (else REDIS_URL); a
                          Redlock's nodes as --url given once per node (or a JSON
                          array, or URLs joined by commas): list, inspect and release
                          read each node, watch one address at a time
  --cacert <file>         TLS: the CA (PEM) that signed the servers' certificates,
                          trusted instead of the system's roots (every server,
                          sentinel and node the command reaches)
  --cert <file>           TLS: a client certificate (PEM), for servers that ask for
                          one; with --key <file>, its unencrypted private key
  --json                  machine-readable output
  --timeout <ms>          bound on connecting, on each command and on the wait for a
                          TLS file's pipe (default 5000)
  -h, --help              this help, or a command's: native-redis-lock list --help

Exit codes:
  0 success   1 other failure   2 usage error (bad command, option, pattern or TLS file)
  3 bad or missing URL          4 Redis unreachable, refused or timed out
  5 key not found (no lock of this package there)   6 confirmation refused
`,
  list: `Usage: native-redis-lock list [pattern] [--url <url>] [--json]

Lists the locks whose Redis key matches the glob pattern (default *), found with SCAN:
key, API, holder (token or lockId cut short), TTL left, fence, fence counter, waiters,
and ExclusiveLock's and syncguard's contents. The pattern is a full Redis key
(DistributedLock's keys start with "lock:"). Over a Redlock's nodes, one row per node
holding the lock, with the node's address.
`,
  inspect: `Usage: native-redis-lock inspect <key> [--url <url>] [--json]

Shows one lock in full: API, holder cut short, TTL left, fence and fence counter, the
connections queued for it and a fair lock's line, ExclusiveLock's and syncguard's contents.
Over a Redlock's nodes, the lock on each node holding it. Exit code 5 when the key holds
no lock of this package (on no node).
`,
  watch: `Usage: native-redis-lock watch [pattern] [--url <url>] [--json] [--interval <ms>] [--count <n>]

A table redrawn in place every interval (default 1000 ms), most contended first (hand-overs
+ waiters + wake-ups): waiters, acquisitions per second (read from the lock's fence counter,
less the fences attempts that found the lock held drew all the same, which their processes
count beside it), hand-overs per second (a release giving the lock straight to a waiter:
within one process, which Redis never sees, or a grant across processes) and wake-ups per
second (a waiter woken by a release to try again). Hand-overs and wake-ups are counted by
the processes themselves, asked each frame on the channel native-redis-lock:watch: only
processes running this version or later that hold a subscriber connection (RESP3) to this
server, with a waiter on it since it opened, answer (a process counts only while a watch
asks, and stops a few seconds after; NATIVE_REDIS_LOCK_WATCH=off keeps one out); wake-ups
announced on the lock's channel (earlier versions) are heard there. A user whose ACL refuses
the request sees - in those two columns. memory:// is in-process and never watched. A lock seen held stays listed while free (holder -). q or
Ctrl-C quits. With --json, one JSON line per refresh. --count stops after n refreshes.
`,
  release: `Usage: native-redis-lock release <key> --force [--yes] [--url <url>] [--json]

Deletes a stuck lock (and ExclusiveLock's owner key, syncguard's index key) and moves its
fence counter on, so a holder that still believes it holds it is fenced out. Asks for
confirmation on a terminal; --yes skips it (required when stdin is not a terminal).
Nothing is deleted if the lock changed hands after it was shown. Over a Redlock's nodes,
on every node holding it (asked once); exit code 1 if it changed hands on any.
`,
}

const OPTIONS = {
  // Several are refused by name (a Redlock's nodes): see oneUrl.
  url: { type: 'string', multiple: true },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  force: { type: 'boolean' },
  yes: { type: 'boolean', short: 'y' },
  interval: { type: 'string' },
  count: { type: 'string' },
  timeout: { type: 'string' },
  cacert: { type: 'string' },
  cert: { type: 'string' },
  key: { type: 'string' },
}


function positiveInt(text, name, min) {
  if (text === undefined) return undefined
  if (!/^\d+$/.test(text) || Number(text) < min) throw usage(`--${name} must be a whole number >= ${min}, got "${text}"`)
  return Number(text)
}

/** A Redis glob: refuses what SCAN would read differently from what was meant. */
function checkPattern(pattern) {
  if (pattern === '') throw usage('the pattern is empty')
  let open = false
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '\\') {
      if (i === pattern.length - 1) throw usage(`the pattern "${pattern}" ends with a lone backslash`)
      i++
    } else if (c === '[') {
      open = true
    } else if (c === ']') {
      open = false
    }
  }
  if (open) throw usage(`the pattern "${pattern}" has an unclosed [`)
  return pattern
}

function parse(argv) {
  let parsed
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (err) {
    throw usage(err.message.split('\n')[0])
  }
  const { values, positionals } = parsed
  const [command, ...rest] = positionals
  return { command, rest, values }
}

function argsFor(command, rest, values) {
  const takes = { list: [0, 1], watch: [0, 1], inspect: [1, 1], release: [1, 1] }[command]
  if (!takes) throw usage(`unknown command "${command}"`)
  if (rest.length < takes[0]) throw usage(`${command} needs a key`)
  if (rest.length > takes[1]) throw usage(`${command} takes at most ${takes[1]} argument, got ${rest.length}`)
  if (command === 'release' && !values.force) throw usage('release deletes a lock another process holds: pass --force')
  const only = { force: 'release', yes: 'release', interval: 'watch', count: 'watch' }
  for (const [option, owner] of Object.entries(only)) {
    if (values[option] !== undefined && command !== owner) throw usage(`--${option} is for ${owner} only`)
  }
}

function describe(lock) {
  const lines = [
    `key:           ${lock.key}`,
    `api:           ${lock.api}`,
    `holder:        ${lock.holder ?? '-'}`,
    `ttl left:      ${lock.ttlMs === null ? 'none' : `${lock.ttlMs} ms`}`,
    `fence:         ${lock.fence ?? '-'}`,
    `fence counter: ${lock.fenceCounter ?? '-'}`,
    `waiters:       ${lock.waiters}`,
  ]
  if (lock.contents) lines.push(`contents:      ${JSON.stringify(lock.contents)}`)
  for (const q of lock.queue ?? []) lines.push(`  queued connection ${q.connection} since ${q.since}`)
  for (const w of lock.line ?? []) lines.push(`  in line ${w.waiter} since ${w.since}`)
  return lines.join('\n')
}

function listTable(locks) {
  if (locks.length === 0) return 'no locks'
  const nodes = locks.some((l) => 'node' in l)
  const cols = ['key', 'api', 'holder', 'ttlMs', 'fence', 'counter', 'waiters', 'contents', ...(nodes ? ['node'] : [])]
  const cells = locks.map((l) => [l.key, l.api, l.holder ?? '-', l.ttlMs ?? '-', l.fence ?? '-',
    l.fenceCounter ?? '-', l.waiters, l.contents ? JSON.stringify(l.contents) : '-', ...(nodes ? [l.node] : [])].map(String))
  const widths = cols.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)))
  return [cols, ...cells].map((r) => r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd()).join('\n')
}

/** What a lock read for release carries only for the script, left out of what is printed. */
function shown(lock) {
  const { forget, ...rest } = lock
  return rest
}

async function confirm(io, question) {
  const rl = readline.createInterface({ input: io.stdin, output: io.stderr })
  try {
    const answer = await new Promise((resolve) => rl.question(question, resolve))
    return /^y(es)?$/i.test(answer.trim())
  } finally {
    rl.close()
  }
}

/** The addresses named: each --url, else REDIS_URL; several are a Redlock's nodes. */
function addressesOf(values, env) {
  const urls = splitUrls(values.url ?? [env.REDIS_URL])
  const addresses = urls.map((url) => parseAddress(url))
  const shown = new Set(addresses.map((address) => address.shown))
  if (shown.size !== addresses.length) throw badUrl('--url names one node twice')
  return addresses
}

/** Runs `work(client, address)` on each node in turn, each connection closed after it. */
async function onEach(addresses, timeoutMs, work) {
  const results = []
  for (const address of addresses) {
    const client = await connect(address, { timeoutMs })
    try {
      results.push(await work(client, address))
    } finally {
      client.close()
    }
  }
  return results
}

/**
 * list, inspect and release over a Redlock's nodes: each node read in turn, each lock marked
 * with the node (its address, password masked) that holds it.
 */
async function runOnNodes(command, rest, values, io, addresses, timeoutMs) {
  const print = (text) => io.stdout.write(`${text}\n`)
  if (command === 'list') {
    const pattern = checkPattern(rest[0] ?? '*')
    const perNode = await onEach(addresses, timeoutMs, async (client, address) =>
      (await listLocks(client, pattern)).map((lock) => ({ ...lock, node: address.shown })))
    const locks = perNode.flat().sort((a, b) => a.key.localeCompare(b.key) || a.node.localeCompare(b.node))
    return print(values.json ? JSON.stringify(locks) : listTable(locks))
  }
  const key = rest[0]
  if (command === 'inspect') {
    const found = (await onEach(addresses, timeoutMs, async (client, address) => {
      const lock = await inspectLock(client, key)
      return lock && { ...shown(lock), node: address.shown }
    })).filter(Boolean)
    if (found.length === 0) throw new CliError(EXIT.notFound, `no lock of native-redis-lock at "${key}" on any of ${addresses.length} nodes`)
    return print(values.json ? JSON.stringify(found) : found.map((lock) => `node:          ${lock.node}\n${describe(lock)}`).join('\n\n'))
  }
  // release: read on every node, confirmed once, then forced free on each node holding it.
  const held = (await onEach(addresses, timeoutMs, async (client, address) => {
    const lock = await inspectLock(client, key)
    return lock && { lock, address }
  })).filter(Boolean)
  if (held.length === 0) throw new CliError(EXIT.notFound, `no lock of native-redis-lock at "${key}" on any of ${addresses.length} nodes`)
  const [{ lock: first }] = held
  if (!values.yes) {
    if (!io.stdin.isTTY) throw new CliError(EXIT.refused, 'not a terminal to confirm on: pass --yes to release without asking')
    const what = `${first.api} lock "${key}" on ${held.length} of ${addresses.length} nodes (holder ${first.holder ?? '-'})`
    if (!(await confirm(io, `Delete ${what} and move its fence on? [y/N] `))) {
      throw new CliError(EXIT.refused, 'not released: confirmation refused')
    }
  }
  const nodes = []
  for (const { lock, address } of held) {
    const client = await connect(address, { timeoutMs })
    try {
      const done = await forceRelease(client, lock)
      nodes.push(done
        ? { node: address.shown, holder: lock.holder, deletedKeys: done.deletedKeys, fenceCounter: done.fenceCounter }
        : { node: address.shown, holder: lock.holder, changedHands: true })
    } finally {
      client.close()
    }
  }
  const result = { released: key, api: first.api, nodes }
  print(values.json ? JSON.stringify(result) : nodes.map((n) => (n.changedHands
    ? `${n.node}: not released, "${key}" changed hands after it was read`
    : `${n.node}: released ${first.api} lock "${key}" held by ${n.holder ?? '-'}: deleted ${n.deletedKeys} key${n.deletedKeys === 1 ? '' : 's'}, fence counter now ${n.fenceCounter ?? '-'}`)).join('\n'))
  const changed = nodes.filter((n) => n.changedHands).length
  if (changed > 0) throw new CliError(EXIT.failed, `not released on ${changed} of ${held.length} nodes: "${key}" changed hands after it was read; inspect it again`)
}

async function run(command, rest, values, io) {
  const addresses = addressesOf(values, io.env)
  const timeoutMs = positiveInt(values.timeout, 'timeout', 1) ?? 5000
  // Read before any connection; the same files for every node, sentinel and master.
  const files = await tlsFiles(values, addresses, timeoutMs)
  for (const address of addresses) address.tlsFiles = files
  if (addresses.length > 1) {
    if (command === 'watch') throw badUrl(SEVERAL_SERVERS)
    return runOnNodes(command, rest, values, io, addresses, timeoutMs)
  }
  const [address] = addresses
  const print = (text) => io.stdout.write(`${text}\n`)
  if (command === 'watch') {
    return watch({
      address,
      pattern: checkPattern(rest[0] ?? '*'),
      intervalMs: positiveInt(values.interval, 'interval', 50) ?? 1000,
      count: positiveInt(values.count, 'count', 1),
      json: Boolean(values.json),
      out: io.stdout,
      err: io.stderr,
      input: io.stdin,
      timeoutMs,
    })
  }
  const pattern = command === 'list' ? checkPattern(rest[0] ?? '*') : null
  const client = await connect(address, { timeoutMs })
  try {
    if (command === 'list') {
      const locks = await listLocks(client, pattern)
      return print(values.json ? JSON.stringify(locks) : listTable(locks))
    }
    const key = rest[0]
    const lock = await inspectLock(client, key)
    if (!lock) throw new CliError(EXIT.notFound, `no lock of native-redis-lock at "${key}"`)
    if (command === 'inspect') return print(values.json ? JSON.stringify(shown(lock)) : describe(lock))
    if (!values.yes) {
      if (!io.stdin.isTTY) throw new CliError(EXIT.refused, 'not a terminal to confirm on: pass --yes to release without asking')
      const what = `${lock.api} lock "${lock.key}" (holder ${lock.holder ?? '-'}, ${lock.waiters} waiting)`
      if (!(await confirm(io, `Delete ${what} and move its fence on? [y/N] `))) {
        throw new CliError(EXIT.refused, 'not released: confirmation refused')
      }
    }
    const done = await forceRelease(client, lock)
    if (!done) throw new CliError(EXIT.failed, `not released: "${key}" changed hands after it was read; inspect it again`)
    const result = { released: lock.key, api: lock.api, holder: lock.holder, deletedKeys: done.deletedKeys, fenceCounter: done.fenceCounter }
    return print(values.json ? JSON.stringify(result) : `released ${lock.api} lock "${lock.key}" held by ${lock.holder ?? '-'}: ` +
      `deleted ${done.deletedKeys} key${done.deletedKeys === 1 ? '' : 's'}, fence counter now ${done.fenceCounter ?? '-'}`)
  } finally {
    client.close()
  }
}

/** Runs the command line; resolves with the exit code. */
async function main(argv, io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env }) {
  try {
    const { command, rest, values } = parse(argv)
    if (values.help || command === 'help' || command === undefined) {
      const topic = HELP[command] ?? HELP[rest[0]] ?? HELP.main
      if (command === undefined && !values.help) {
        io.stderr.write(HELP.main)
        return EXIT.usage
      }
      io.stdout.write(topic)
      return EXIT.ok
    }
    argsFor(command, rest, values)
    await run(command, rest, values, io)
    return EXIT.ok
  } catch (err) {
    if (err instanceof CliError) {
      io.stderr.write(`native-redis-lock: ${err.message}\n`)
      return err.exitCode
    }
    io.stderr.write(`native-redis-lock: ${err && err.message ? err.message : err}\n`)
    return EXIT.failed
  }
}

module.exports = { main, EXIT }
