'use strict'

// redlock@4 (mike-marcacci/node-redlock 4.x, bluebird promises, EVALSHA with EVAL fallback).
const Redlock = require('redlock')
const { connect } = require('../lib/redis')

module.exports = {
  name: 'redlock@4',
  kind: 'peer',
  package: 'redlock',
  async create({ port }) {
    const client = await connect(port)
    // One attempt for the uncontended scenarios; a retrying instance for the contended one
    // (redlock 4 takes its retry settings per instance only).
    const once = new Redlock([client], { retryCount: 0, retryJitter: 0 })
    const waiting = new Redlock([client], { retryCount: -1, retryDelay: 10, retryJitter: 5 })
    const ignore = () => {}
    once.on('clientError', ignore)
    waiting.on('clientError', ignore)
    return {
      async acquire(key, ttlMs) {
        try {
          return await once.lock(key, ttlMs)
        } catch {
          return null
        }
      },
      release: (lock) => once.unlock(lock),
      waitAcquire: (key, ttlMs) => waiting.lock(key, ttlMs),
      close: () => client.quit(),
    }
  },
}
