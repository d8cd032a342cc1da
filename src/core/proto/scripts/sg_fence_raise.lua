-- Redlock's write-back for syncguard's layout (docs/plans/redlock.md, "Fences that strictly
-- increase"): an acquisition over a quorum of masters takes as its fence the highest a majority
-- drew, and before it succeeds writes it on those nodes, in the record (its fence field, so a
-- lookup answers the fence the winner was given) and under the counter, raised to it at least
-- (sg_acquire.lua's INCR then draws more). Only on a live record of this lockId; never lowers a
-- counter.
-- KEYS[1] lock key, KEYS[2] fence counter. ARGV[1] lockId, ARGV[2] the fence (the tolerance
-- is sg_common.lua's own).
-- Returns the counter after, 0 when the record is not this lockId's or not live (nothing
-- written); NOFENCE when the counter is unusable or the fence too large.
local held = record_at(KEYS[1])
if not held or held.lockId ~= ARGV[1] or not live(held, now_ms()) then
  return 0
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then
  return 0
end
local fence = tonumber(ARGV[2])
local counter = fence_counter(KEYS[2], 0)
if not counter or not fence or fence > FENCE_MAX then
  return no_fence()
end
if counter < fence then
  -- As a decimal: Lua would print a large number in exponent form.
  redis.call('INCRBY', KEYS[2], string.format('%d', fence - counter))
  counter = fence
end
held.fence = string.format('%015d', fence)
redis.call('SET', KEYS[1], cjson.encode(held), 'PX', ttl)
return counter
