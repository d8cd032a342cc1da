-- acquire.lua for a fair lock (`fair: true`): the lock goes to the waiter that has waited
-- longest, so nobody barges in ahead of the line, not even a plain attempt. A waiter's
-- failed attempt takes its place in the line (or keeps it) and renews its liveness; the
-- line skips, and forgets, waiters that stopped renewing (their process went away).
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] the line (sorted set: waiter -> arrival,
-- microseconds of the server's clock), KEYS[4] liveness (sorted set: waiter -> ms until
-- which it counts as waiting); all one hash slot.
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the fence counter's retention window in ms (see
-- fence.lua), ARGV[4] the waiter ('' for a plain attempt, which joins
-- nothing), ARGV[5] how long its place lasts without an attempt (ms), ARGV[6] lifetime of
-- the line's keys (ms).
-- Fences are drawn two at a time, as in acquire.lua.
-- Returns {1, fence} when taken, {0, pttl} of the holder when not.
if redis.replicate_commands then
  redis.replicate_commands()
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local me = ARGV[4]

-- The first waiter in line that is still alive; the dead before it are forgotten.
local function first()
  while true do
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not head then
      return nil
    end
    local alive = tonumber(redis.call('ZSCORE', KEYS[4], head))
    if alive and alive > now then
      return head
    end
    redis.call('ZREM', KEYS[3], head)
    redis.call('ZREM', KEYS[4], head)
  end
end

keep_fences_forever(KEYS[2], ARGV[3])
if not fence_counter(KEYS[2], 2) then
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
  end
  return no_fence()
end

local head = first()
if head == nil or head == me then
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    if me ~= '' then
      redis.call('ZREM', KEYS[3], me)
      redis.call('ZREM', KEYS[4], me)
    end
    local counter = redis.call('INCRBY', KEYS[2], 2)
    keep_fences(KEYS[2], ARGV[2], ARGV[3])
    return {1, counter - 1}
  end
end
-- Our own token: this attempt, sent again after its connection dropped under it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local drawn = fence_drawn(KEYS[2])
  if drawn then
    return {1, drawn}
  end
  redis.call('DEL', KEYS[1])
  return no_fence()
end
if me ~= '' then
  redis.call('ZADD', KEYS[3], 'NX', tonumber(time[1]) * 1000000 + tonumber(time[2]), me)
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[5]), me)
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
  redis.call('PEXPIRE', KEYS[4], ARGV[6])
end
return {0, redis.call('PTTL', KEYS[1])}
