-- Redlock's write-back (see docs/plans/redlock.md): an acquisition over a quorum of masters
-- takes as its fence the highest a majority drew, and raises those nodes' counters past it
-- before it succeeds, so any later acquisition whose majority meets this one draws more.
-- The counter ends at ARGV[1] + 1 at least: the one after the fence stays kept for a
-- handover, as acquire.lua leaves it. Never lowers a counter.
-- KEYS[1] fence counter. ARGV[1] the fence, ARGV[2] the lock's ttl in ms, ARGV[3] the
-- counter's retention window in ms (see fence.lua), empty to leave its expiry alone.
-- Returns the counter after; NOFENCE when the counter is unusable or the fence too large.
local fence = tonumber(ARGV[1])
local counter = fence_counter(KEYS[1], 0)
if not counter or not fence or fence + 1 > FENCE_MAX then
  return no_fence()
end
if counter < fence + 1 then
  -- INCRBY keeps the counter's expiry (SET would need KEEPTTL, Redis 6.0); as a decimal:
  -- Lua would print a large number in exponent form.
  redis.call('INCRBY', KEYS[1], string.format('%d', fence + 1 - counter))
  counter = fence + 1
end
if ARGV[3] ~= '' then
  keep_fences_forever(KEYS[1], ARGV[3])
  keep_fences(KEYS[1], ARGV[2], ARGV[3])
end
return counter
