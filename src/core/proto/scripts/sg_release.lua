-- syncguard's release by lockId: the index key names the lock key, whose record must be ours
-- and live. An expired record is deleted with the index key whoever holds it, as syncguard
-- does. Ours also wakes one waiter, as release_wake.lua does, when the lock key deleted is
-- the one the caller named (it alone can name the queue and channel: a tagged lock key's
-- siblings need the slot's CRC16); otherwise the reply names the key, and the caller wakes.
-- KEYS[1] index key; KEYS[2], KEYS[3] (optional) the lock key expected and its queue.
-- ARGV[1] lockId; with KEYS[2]: ARGV[2] the lock's channel, and ARGV[3] '1' when the releasing
-- connection has waiters of its own (it wakes one itself), absent when it has none.
-- Returns {1, lock key} released, {-2, lock key} expired and deleted (a bare 1 or -2 when the
-- lock key is KEYS[2], which the caller knows: a table reply costs Redis more), {0} another's
-- record, {-1} no index key or no record.
local lock_key = redis.call('GET', KEYS[1])
if not lock_key then
  return {-1}
end
local held = record_at(lock_key)
if not held then
  return {-1}
end
local code = 1
if not live(held, now_ms()) then
  code = -2
elseif held.lockId ~= ARGV[1] then
  return {0}
end
redis.call('DEL', lock_key, KEYS[1])
if lock_key == KEYS[2] and ARGV[3] ~= '1' then
  wake_first(KEYS[3], ARGV[2])
end
if lock_key == KEYS[2] then
  return code
end
return {code, lock_key}
