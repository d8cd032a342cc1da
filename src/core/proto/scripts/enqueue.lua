-- Queue a connection that has waiters for a lock, behind those queued before it (a
-- connection already queued keeps its place). The queue lives as long as someone renews it.
-- KEYS[1] queue (sorted set), KEYS[2] lock key.
-- ARGV[1] the connection's name: its id, with '!' after it when it listens on its own wake
-- channel of the lock (see announce.lua's `wake_first`), ARGV[2] its queue score (as
-- acquire_queued.lua's),
-- ARGV[3] lifetime of the queue in ms.
-- Returns 1 when the lock is free right now: the release we would wait for already happened.
redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('EXISTS', KEYS[2]) == 0 and 1 or 0
