-- Take a free lock and number it in one step, so fence order is acquisition order.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] (optional) owner key; all one hash slot.
-- ARGV[1] value of the lock key, ARGV[2] ttl in ms, ARGV[3] the fence counter's retention
-- window in ms, or '-' when the client knows the counter kept long enough (see fence.lua
-- `keep_fences`), ARGV[4] (with KEYS[3]) owner token.
-- DistributedLock stores its token as the lock's value. ExclusiveLock stores the user's
-- contents there, as the original package does, and its token in the owner key beside it;
-- both keys get one absolute expiry, computed once (Redis before 7.2 reads the clock anew
-- for every PX, so two PX in one script can differ), which refresh and release check.
-- Every attempt has a fresh token, so finding our own token means this is the same attempt
-- sent again after its connection dropped under it: it already won, and wins again with the
-- fence it drew (the client counts validity from the first send, so nothing is extended).
-- Fences are drawn two at a time: the holder's, and the one after it, kept for a handover
-- (see handoff.lua), so the counter is always past the last fence given out.
-- Returns {1, fence} when taken, {0, pttl} of the current holder when not.
-- The fences are drawn after the lock is written, in one INCRBY: a counter that can give
-- none (see fence.lua) takes the lock back, so the attempt fails with nothing written. A
-- lock this same attempt set before (the transaction form draws its fence after setting)
-- is taken back too.
local function taken_back()
  redis.call('DEL', KEYS[1])
  if KEYS[3] then
    redis.call('DEL', KEYS[3])
  end
  return no_fence()
end

local function numbered()
  local counter = draw_fences(KEYS[2], 2)
  if counter then
    keep_fences(KEYS[2], ARGV[2], ARGV[3])
    return {1, counter - 1}
  end
  return taken_back()
end

local function won_before(owner_key, token)
  -- pcall: a key of another type is simply not ours.
  if redis.pcall('GET', owner_key) == token then
    local drawn = fence_drawn(KEYS[2])
    if drawn then
      keep_fences(KEYS[2], ARGV[2], ARGV[3])
      return {1, drawn}
    end
    return taken_back()
  end
end

if not KEYS[3] then
  keep_fences_forever(KEYS[2], ARGV[3])
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return numbered()
  end
  return won_before(KEYS[1], ARGV[1]) or {0, redis.call('PTTL', KEYS[1])}
end
if redis.replicate_commands then
  redis.replicate_commands()
end
keep_fences_forever(KEYS[2], ARGV[3])
local now = redis.call('TIME')
local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[2])
local set = redis.pcall('SET', KEYS[1], ARGV[1], 'NX', 'PXAT', at)
local pxat = not (type(set) == 'table' and set.err)
if not pxat then
  -- Before Redis 6.2, SET has no PXAT: the same in two steps.
  set = redis.call('SET', KEYS[1], ARGV[1], 'NX')
  if set then
    redis.call('PEXPIREAT', KEYS[1], at)
  end
end
if not set then
  local ours = redis.pcall('GET', KEYS[1]) == ARGV[1] and same_expiry(KEYS[1], KEYS[3])
  return (ours and won_before(KEYS[3], ARGV[4])) or {0, redis.call('PTTL', KEYS[1])}
end
if pxat then
  redis.call('SET', KEYS[3], ARGV[4], 'PXAT', at)
else
  redis.call('SET', KEYS[3], ARGV[4])
  redis.call('PEXPIREAT', KEYS[3], at)
end
return numbered()
