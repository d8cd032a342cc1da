-- Push back the TTL of a lock we still own, in one step with the ownership check.
-- KEYS[1] the key holding our token; KEYS[2] (optional) the lock key beside it.
-- ARGV[1] owner token, ARGV[2] ttl in ms, ARGV[3] (with KEYS[2]) the lock key's value.
-- With two keys, the lock key must hold our value and share the owner key's absolute
-- expiry; anything else means another client deleted, re-created or re-timed it, and the
-- lock is not ours. Both then get one new absolute expiry.
-- Returns 1 when pushed back, 0 when the lock is gone or not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if not KEYS[2] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if redis.call('GET', KEYS[2]) ~= ARGV[3] or not same_expiry(KEYS[2], KEYS[1]) then
  return 0
end
if redis.replicate_commands then
  redis.replicate_commands()
end
local now = redis.call('TIME')
local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[2])
redis.call('PEXPIREAT', KEYS[2], at)
redis.call('PEXPIREAT', KEYS[1], at)
return 1
