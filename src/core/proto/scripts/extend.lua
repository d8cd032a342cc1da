-- Add time to the remaining TTL of a lock we still own; never revive or touch another's.
-- KEYS[1] lock key, KEYS[2] its fence counter (kept past it, see fence.lua); ARGV[1] owner
-- token, ARGV[2] ms to add.
-- Returns the new TTL in ms, or 0 when the lock is gone or not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  ttl = 0
end
ttl = ttl + tonumber(ARGV[2])
keep_fences_past(KEYS[2], KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
return ttl
