-- Queue a connection that has waiters for a lock, behind those queued before it (a
-- connection already queued keeps its place). The queue lives as long as someone renews it.
-- KEYS[1] queue (sorted set, score = microseconds of server time), KEYS[2] lock key.
-- ARGV[1] the connection's id, ARGV[2] lifetime of the queue in ms.
-- Returns 1 when the lock is free right now: the release we would wait for already happened.
if redis.replicate_commands then
  redis.replicate_commands()
end
local now = redis.call('TIME')
redis.call('ZADD', KEYS[1], 'NX', tonumber(now[1]) * 1000000 + tonumber(now[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('EXISTS', KEYS[2]) == 0 and 1 or 0
