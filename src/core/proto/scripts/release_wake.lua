-- Release a lock that may have waiters, and wake exactly one of them: the connection that
-- has queued longest and is still there is taken off the queue and told (it wakes one of its
-- waiters; see announce.lua's `wake_first`). Nobody else hears of it, so a release never sets off a herd.
-- KEYS[1] lock key (holds the token), KEYS[2] queue of waiting connections (sorted set).
-- ARGV[1] token, ARGV[2] the lock's channel, ARGV[3] '1' when the releasing connection has
-- waiters of its own: it wakes one itself, and the queue is left alone.
-- Returns 1 when our lock was deleted, 0 when it was gone or not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] == '1' then
  return 1
end
wake_first(KEYS[2], ARGV[2])
return 1
