'use strict'

// A TCP server that is no Redis: it answers whatever it is sent with an HTTP 400, as a web
// server would when a Redis client is pointed at its port by mistake.

const net = require('node:net')

/** Starts one on a free port of 127.0.0.1: `{ port, close() }`. */
async function startHttpLike() {
  const server = net.createServer((socket) => {
    socket.on('error', () => {})
    socket.on('data', () => socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { port: server.address().port, close: () => new Promise((resolve) => server.close(resolve)) }
}

/** A server answering every command with `reply` (bytes no real Redis sends): `{ port, close() }`. */
async function startAnswering(reply) {
  const server = net.createServer((socket) => {
    socket.on('error', () => {})
    socket.on('data', () => socket.write(reply))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { port: server.address().port, close: () => new Promise((resolve) => server.close(resolve)) }
}

module.exports = { startHttpLike, startAnswering }
