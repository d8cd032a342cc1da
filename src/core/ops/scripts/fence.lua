-- Prepended to every script that draws fences. A fence is 15 decimal digits (see token.rs),
-- and two are drawn per acquisition (see acquire.lua). The counter must hold a whole number
-- that leaves room for `room` more; when it does not (another client wrote to it, or 10^15
-- fences were drawn) no fence can be given, and the acquisition fails before it writes.
local FENCE_MAX = 999999999999999
local function fence_counter(key, room)
  local value = redis.pcall('GET', key)
  if value == false then
    return 0
  end
  -- Only what INCRBY takes as a number (no sign, no leading zero), so every script and the
  -- transaction form agree on which counters are usable.
  if type(value) ~= 'string' or #value > 15 or not (value == '0' or string.match(value, '^[1-9]%d*$')) then
    return nil
  end
  local n = tonumber(value)
  if n > FENCE_MAX - room then
    return nil
  end
  return n
end
local function no_fence()
  return redis.error_reply('NOFENCE no fence can be drawn: the counter does not hold a whole number below 999999999999998')
end
-- The fence of an attempt that finds its own token set already (the same attempt, sent again
-- after its connection dropped under it): the one below the counter. `nil` when the counter
-- cannot be what that attempt left behind.
local function fence_drawn(key)
  local counter = fence_counter(key, 0)
  if counter and counter >= 2 then
    return counter - 1
  end
end
-- Draws `count` fences for a lock the script has just written, in one command: the counter
-- as it is after them, or nil, with the counter left as it was, when it cannot give them.
local function draw_fences(key, count)
  local after = redis.pcall('INCRBY', key, count)
  if type(after) ~= 'number' then
    return nil
  end
  if after < count or after > FENCE_MAX then
    redis.call('INCRBY', key, -count)
    return nil
  end
  return after
end
