-- syncguard's acquire: a live record is contention; none, or an expired one, is replaced by
-- ours with the next fence (15 digits), and the index key names the lock key, both for the TTL.
-- An expired holder's index key is left to its own TTL. Two things no syncguard process can
-- tell apart from its own acquire: a live record with our lockId (this attempt, sent again
-- after its connection dropped) answers won again with its fence and expiry; contention
-- tells the holder's PTTL.
-- KEYS[1] lock key, KEYS[2] index key, KEYS[3] fence counter.
-- ARGV[1] lockId, ARGV[2] ttl in ms, ARGV[3] the lock key as the index stores it,
-- ARGV[4] the user's key (as the record stores it).
-- Returns {1, fence, expiresAtMs} or {0, pttl}.
local now = now_ms()
local held = record_at(KEYS[1])
if held and live(held, now) then
  if held.lockId == ARGV[1] then
    return {1, held.fence, held.expiresAtMs}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
-- Numbers, as syncguard passes them: a TTL past what PX takes fails here, after the INCR.
local ttl = ARGV[2] + 0
-- PX gets ARGV's digits where the number would give Redis the same ones (up to 15 digits,
-- every one exact): a number is formatted at every call (%.17g), a string is not.
local px = ttl
if #ARGV[2] < 16 then
  px = ARGV[2]
end
local fence = string.format('%015d', redis.call('INCR', KEYS[3]))
local record = {
  lockId = ARGV[1],
  expiresAtMs = now + ttl,
  acquiredAtMs = now,
  key = ARGV[4],
  fence = fence,
}
redis.call('SET', KEYS[1], cjson.encode(record), 'PX', px)
redis.call('SET', KEYS[2], ARGV[3], 'PX', px)
return {1, fence, record.expiresAtMs}
