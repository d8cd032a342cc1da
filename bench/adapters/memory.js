'use strict'

// One of our adapters on the embedded memory:// backend: the same API calls, each run where
// the caller is (the JS thread), beside the redis-server rows of the same run.

/** `adapter` with its locks on `memory://bench` in place of the run's redis-server. */
const onMemory = (adapter) => ({
  ...adapter,
  name: `${adapter.name} (memory://)`,
  create: (server) => adapter.create({ ...server, url: 'memory://bench' }),
})

module.exports = { onMemory }
