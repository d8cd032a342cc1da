-- Release a lock that may have waiters, and wake exactly one of them: the connection that
-- has queued longest and is still there is taken off the queue and told (it wakes one of its
-- waiters; see announce.lua's `wake_first`). Nobody else hears of it, so a release never sets off a herd.
-- KEYS[1] lock key (holds the token), KEYS[2] queue of waiting connections (sorted set).
-- ARGV[1] token, ARGV[2] the lock's channel, ARGV[3] '1' when the releasing connection has
-- waiters of its own: it wakes one itself, and the queue is left alone.
-- Returns 1 when our lock was deleted, 0 when it was gone or not ours.
-- announce.lua comes after this part (release_wake_tail.lua after it), not before: its
-- helpers are defined only when someone is queued. Defining them costs Redis more than the
-- rest of a release of a lock nobody waits for (the usual one), measured under callgrind.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] == '1' then
  return 1
end
-- pcall: a user whose ACL allows no sorted sets or channels still releases; waiters poll.
local popped = redis.pcall('ZPOPMIN', KEYS[2])
if type(popped) ~= 'table' or not popped[1] then
  return 1
end
