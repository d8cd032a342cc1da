-- acquire_queued.lua for a store that grants (see release_grant.lua): the same attempt, and
-- when the lock is held the waiter's connection joins the lock's ring in the same step, once,
-- so no release can slip between a failed attempt and the joining. A win leaves the ring as
-- it is: a connection stays in it while it has waiters, and lingers after (a grant nobody
-- takes is passed on, and the lingering connection leaves then).
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] ring; all one hash slot.
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the fence counter's retention window in ms,
-- ARGV[4] the connection's id.
-- Returns {1, fence} when taken, {0, pttl} of the current holder when not, {0, -3} (no
-- PTTL answers that) when the connection was in the ring already: a release grants it the
-- lock, and it polls only in case none does (backoff::ring_poll), a poll the holder's time
-- would hardly shorten, so that time is not read.
-- Ring commands run under pcall: a user whose ACL allows no lists just polls.
-- `join` answers whether the connection was in the ring already.
local function join()
  local at = redis.pcall('LPOS', KEYS[3], ARGV[4])
  if type(at) == 'number' then
    return true
  end
  if type(at) == 'table' then
    -- Before Redis 6.0.6 there is no LPOS: a place is given up rather than held twice.
    redis.pcall('LREM', KEYS[3], 0, ARGV[4])
  end
  -- The tail is the head of the line: joining at the front is joining at the back.
  redis.pcall('LPUSH', KEYS[3], ARGV[4])
  return false
end

local taken = queued_attempt(function() end)
if taken then
  return taken
end
if join() then
  return {0, -3}
end
return {0, redis.call('PTTL', KEYS[1])}
