-- syncguard's extend by lockId: the record must be ours and live; its expiry becomes now + ttl
-- (set, not added), the record and the index key get the new TTL. An expired record is deleted
-- with the index key, as syncguard does.
-- KEYS[1] index key. ARGV[1] lockId, ARGV[2] ttl in ms.
-- Returns {1, expiresAtMs}, or 0 for every failure.
local lock_key = redis.call('GET', KEYS[1])
if not lock_key then
  return 0
end
local held = record_at(lock_key)
if not held then
  return 0
end
local now = now_ms()
if not live(held, now) then
  redis.call('DEL', lock_key, KEYS[1])
  return 0
end
if held.lockId ~= ARGV[1] then
  return 0
end
local ttl = tonumber(ARGV[2])
held.expiresAtMs = now + ttl
redis.call('SET', lock_key, cjson.encode(held), 'PX', ttl)
redis.call('SET', KEYS[1], lock_key, 'PX', ttl)
return {1, held.expiresAtMs}
