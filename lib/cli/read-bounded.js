'use strict'

// A file the command line takes (a TLS certificate or key), read within bounds: at most
// MAX_BYTES, and, for a pipe (`--key <(cmd)`) or device, at most --timeout between bytes and
// OVERALL_TIMEOUTS × --timeout in all, so that no file can keep the command waiting.

const fs = require('node:fs')
const net = require('node:net')
const { usage } = require('./errors')

// More than any certificate chain or key. A regular file larger is refused unread; a pipe or
// device (/dev/zero) is read up to this bound, then refused.
const MAX_BYTES = 1024 * 1024
// A writer that sends a byte every so often would keep a per-gap bound waiting for ever.
const OVERALL_TIMEOUTS = 3

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function cannotRead(option, file, err) {
  const why = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'a directory', ELOOP: 'too many symbolic links', ENOTDIR: 'a path through a file' }[err.code] ?? err.code ?? err.message
  return usage(`--${option} ${file}: cannot read it (${why})`)
}

const tooBig = (option, file) => usage(`--${option} ${file} holds more than 1 MiB: no certificate or key file is that large`)

/**
 * The two time bounds on reading a pipe or device: `timeoutMs` since the last bytes, and
 * OVERALL_TIMEOUTS × `timeoutMs` since the start. `refusal()` names the one that ran out.
 */
function waitBounds(option, file, timeoutMs) {
  const overallMs = OVERALL_TIMEOUTS * timeoutMs
  const overallEnd = Date.now() + overallMs
  let gapEnd = Date.now() + timeoutMs
  return {
    progressed() {
      gapEnd = Date.now() + timeoutMs
    },
    msLeft() {
      return Math.min(gapEnd, overallEnd) - Date.now()
    },
    refusal() {
      return overallEnd <= gapEnd
        ? usage(`--${option} ${file}: not ended within ${overallMs} ms (${OVERALL_TIMEOUTS} × --timeout)`)
        : usage(`--${option} ${file}: nothing more came from it within ${timeoutMs} ms (--timeout)`)
    },
  }
}

/**
 * The file's bytes, at most MAX_BYTES; refuses an empty file. Opened without blocking, so a
 * FIFO that no process writes to reads at once as empty instead of hanging.
 */
async function readBounded(option, file, timeoutMs) {
  if (file === '') throw usage(`--${option} names no file`)
  let fd
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  } catch (err) {
    throw cannotRead(option, file, err)
  }
  let handedOver = false
  let bytes
  try {
    const stat = fs.fstatSync(fd)
    if (stat.isDirectory()) throw usage(`--${option} ${file}: cannot read it (a directory)`)
    if (stat.isFile()) {
      if (stat.size > MAX_BYTES) throw tooBig(option, file)
      // Read as a device is: it may have grown since its size was read.
      bytes = await readNonBlocking(option, file, fd, timeoutMs)
    } else if (stat.isFIFO() || stat.isSocket()) {
      handedOver = true
      bytes = await readPipe(option, file, fd, timeoutMs)
    } else {
      bytes = await readNonBlocking(option, file, fd, timeoutMs)
    }
  } finally {
    if (!handedOver) fs.closeSync(fd)
  }
  if (bytes.length === 0) throw usage(`--${option} ${file} is empty`)
  return bytes
}

/**
 * A pipe or socket (`<(cmd)` names one as /dev/fd/N), read through the event loop, never a
 * blocking read: on macOS opening /dev/fd/N duplicates the descriptor and ignores O_NONBLOCK,
 * and a blocked read in libuv's thread pool could be neither cancelled nor outlived (even
 * process.exit waits for the pool's threads). The socket owns `fd` and closes it when
 * destroyed, so a refusal leaves nothing that keeps the process alive.
 */
function readPipe(option, file, fd, timeoutMs) {
  return new Promise((resolve, reject) => {
    let pipe
    try {
      pipe = new net.Socket({ fd, readable: true, writable: false })
    } catch (err) {
      fs.closeSync(fd)
      reject(cannotRead(option, file, err))
      return
    }
    const bounds = waitBounds(option, file, timeoutMs)
    const chunks = []
    let total = 0
    let timer
    const finish = (err, bytes) => {
      if (!pipe) return
      clearTimeout(timer)
      pipe.destroy()
      pipe = null
      if (err) reject(err)
      else resolve(bytes)
    }
    const arm = () => {
      clearTimeout(timer)
      timer = setTimeout(() => finish(bounds.refusal()), Math.max(bounds.msLeft(), 0))
    }
    const take = (chunk) => {
      total += chunk.length
      if (total > MAX_BYTES) return finish(tooBig(option, file))
      chunks.push(chunk)
      bounds.progressed()
      arm()
    }
    pipe.on('data', take)
    pipe.on('end', () => finish(null, Buffer.concat(chunks)))
    pipe.on('error', (err) => finish(cannotRead(option, file, err)))
    arm()
    // The socket has made the descriptor non-blocking, and reads only from the next turn of
    // the event loop. A FIFO that no process ever opened for writing reads as ended, but
    // Linux's epoll never reports it so: one read now tells, before the socket's first.
    const first = Buffer.alloc(64 * 1024)
    let n
    try {
      n = fs.readSync(fd, first, 0, first.length, null)
    } catch (err) {
      if (err.code !== 'EAGAIN' && err.code !== 'EWOULDBLOCK') finish(cannotRead(option, file, err))
      return
    }
    if (n === 0) finish(null, Buffer.alloc(0))
    else take(Buffer.from(first.subarray(0, n)))
  })
}

/**
 * A regular file, or a character or block device (/dev/zero, a terminal): read without
 * blocking, as the file was opened, EAGAIN (nothing typed yet) tried again every 10 ms within
 * the bounds (a regular file never answers EAGAIN).
 */
async function readNonBlocking(option, file, fd, timeoutMs) {
  const bounds = waitBounds(option, file, timeoutMs)
  const chunks = []
  let total = 0
  const chunk = Buffer.alloc(64 * 1024)
  for (;;) {
    if (bounds.msLeft() <= 0) throw bounds.refusal()
    let n
    try {
      n = fs.readSync(fd, chunk, 0, chunk.length, null)
    } catch (err) {
      if (err.code !== 'EAGAIN') throw cannotRead(option, file, err)
      await sleep(10)
      continue
    }
    if (n === 0) return Buffer.concat(chunks)
    total += n
    if (total > MAX_BYTES) throw tooBig(option, file)
    chunks.push(Buffer.from(chunk.subarray(0, n)))
    bounds.progressed()
  }
}

module.exports = { readBounded, OVERALL_TIMEOUTS }
