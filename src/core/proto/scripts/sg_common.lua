-- Prepended to syncguard's scripts (sg_*.lua), which keep its layout: a lock key holding a JSON
-- record {lockId, expiresAtMs, acquiredAtMs, key, fence}, an index key from the lockId to the
-- lock key, and a fence counter that never expires. Time is the server's (TIME, in ms), and a
-- record is live while its expiry is less than the tolerance in the past, as syncguard decides.
-- Digit strings (TIME's, and the ms ARGV carries) go into arithmetic as they are: Lua reads
-- them as tonumber would, for less than half of what a tonumber call costs Redis.

-- syncguard's TIME_TOLERANCE_MS: the scripts' own constant (every argument costs Redis a
-- string and a table slot at every call).
local TOLERANCE_MS = 1000

local function now_ms()
  local time = redis.call('TIME')
  return time[1] * 1000 + math.floor(time[2] / 1000)
end

local function live(record, now)
  return record.expiresAtMs > now - TOLERANCE_MS
end

-- The record at `key`, or nil; a value that is not JSON fails the script, as syncguard's does.
local function record_at(key)
  local raw = redis.call('GET', key)
  if not raw then
    return nil
  end
  return cjson.decode(raw), raw
end
