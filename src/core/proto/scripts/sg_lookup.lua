-- syncguard's lookup: the live record, by its lock key or by a lockId's index key.
-- By key: KEYS[1] lock key, ARGV[1] tolerance in ms; answers the record written afresh.
-- By lockId: KEYS[1] index key, ARGV[1] tolerance in ms, ARGV[2] the lockId, which the record
-- must hold; answers the record as stored.
-- Returns the record's JSON, or nil.
local now = now_ms()
local tolerance = tonumber(ARGV[1])
if ARGV[2] then
  local lock_key = redis.call('GET', KEYS[1])
  if not lock_key then
    return false
  end
  local held, raw = record_at(lock_key)
  if held and held.lockId == ARGV[2] and live(held, now, tolerance) then
    return raw
  end
  return false
end
local held = record_at(KEYS[1])
if held and live(held, now, tolerance) then
  return cjson.encode(held)
end
return false
