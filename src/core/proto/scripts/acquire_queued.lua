-- acquire.lua for a waiter (DistributedLock only): the same attempt, and the waiter's
-- connection keeps its place in the lock's queue of waiting connections (see wake.rs) in the
-- same step, so no release can slip between a failed attempt and the queueing.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] queue; all one hash slot.
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the fence counter's retention window in ms (see
-- fence.lua), ARGV[4] the connection's name in the queue (see enqueue.lua), ARGV[5] its queue score
-- (microseconds of its clock), ARGV[6] '1' while other waiters of that connection remain,
-- ARGV[7] lifetime of the queue in ms.
-- Returns {1, fence} when taken, {0, pttl} of the current holder when not.
-- Queue commands run under pcall: a user whose ACL allows no sorted sets just polls.
local function stay_queued()
  if redis.pcall('ZADD', KEYS[3], 'NX', ARGV[5], ARGV[4]) == 1 then
    redis.pcall('PEXPIRE', KEYS[3], ARGV[7])
  end
end

local taken = queued_attempt(function()
  if ARGV[6] == '1' then
    stay_queued()
  else
    redis.pcall('ZREM', KEYS[3], ARGV[4])
  end
end)
if taken then
  return taken
end
stay_queued()
return {0, redis.call('PTTL', KEYS[1])}
