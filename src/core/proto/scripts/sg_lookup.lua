-- syncguard's lookup: the live record, by its lock key or by a lockId's index key.
-- By key: KEYS[1] lock key; answers the record written afresh.
-- By lockId: KEYS[1] index key, ARGV[1] the lockId, which the record must hold; answers the
-- record as stored.
-- Returns the record's JSON, or nil.
local now = now_ms()
if ARGV[1] then
  local lock_key = redis.call('GET', KEYS[1])
  if not lock_key then
    return false
  end
  local held, raw = record_at(lock_key)
  if held and held.lockId == ARGV[1] and live(held, now) then
    return raw
  end
  return false
end
local held = record_at(KEYS[1])
if held and live(held, now) then
  return cjson.encode(held)
end
return false
