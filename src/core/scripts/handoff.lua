-- Hand a lock we hold straight to a waiter of our own process: it never becomes free, so
-- nobody barges in between, and the waiter needs no request of its own. One step, so the
-- new holder's fence is drawn while the lock is provably ours to give.
-- KEYS[1] lock key, KEYS[2] fence counter; one hash slot.
-- ARGV[1] our token, ARGV[2] the waiter's fresh token, ARGV[3] its TTL in ms.
-- Returns the waiter's fence, or 0 when the lock is no longer ours (nothing was changed).
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return redis.call('INCR', KEYS[2])
end
-- The waiter's token already: this handoff, sent again after its connection dropped under it.
if holder == ARGV[2] then
  return tonumber(redis.call('GET', KEYS[2])) or 0
end
return 0
