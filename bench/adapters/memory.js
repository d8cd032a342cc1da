'use strict'

// One of our adapters on the embedded memory:// backend: the same API calls, each run where
// the caller is (the JS thread), beside the redis-server rows of the same run. (a) and (b)
// only: a memory:// keyspace lives in one process, so the contended scenarios, whose
// contenders include other processes, would not contend at all.

/** `adapter` with its locks on `memory://bench` in place of the run's redis-server. */
const onMemory = (adapter) => ({
  ...adapter,
  name: `${adapter.name} (memory://)`,
  scenarios: ['a', 'b'],
  create: (server) => adapter.create({ ...server, url: 'memory://bench' }),
})

module.exports = { onMemory }
