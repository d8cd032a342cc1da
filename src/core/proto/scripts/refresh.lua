-- Push back the TTL of a lock we still own, in one step with the ownership check.
-- KEYS[1] the key holding our token; KEYS[2] (optional) the lock key beside it; the last
-- key the lock's fence counter, kept past the lock (see fence.lua).
-- ARGV[1] owner token, ARGV[2] ttl in ms, ARGV[3] (with KEYS[2]) the lock key's value,
-- ARGV[4] (with KEYS[2], '' when unknown) the lock key's absolute expiry as our transaction
-- set it; the last ARGV the counter's retention window in ms.
-- With two keys, the lock key must be ours (see same_expiry.lua); anything else means
-- another client deleted, re-created or re-timed it. Both then get one new absolute expiry,
-- and the owner key our token: from now on it alone tells that the lock is ours, whether
-- or not this call's answer reaches us.
-- Returns 1 when pushed back, 0 when the lock is gone or not ours.
if #KEYS == 2 then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  keep_fences_refreshed(KEYS[2], ARGV[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not exclusive_ours(KEYS[2], KEYS[1], ARGV[3], ARGV[1], ARGV[4]) then
  return 0
end
if redis.replicate_commands then
  redis.replicate_commands()
end
local now = redis.call('TIME')
local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[2])
keep_fences_refreshed(KEYS[3], ARGV[2], ARGV[5])
redis.call('PEXPIREAT', KEYS[2], at)
local set = redis.pcall('SET', KEYS[1], ARGV[1], 'PXAT', at)
if type(set) == 'table' and set.err then
  -- Before Redis 6.2, SET has no PXAT; there the owner key is already ours (a transaction's
  -- expiry is known only from 7.0 on).
  redis.call('PEXPIREAT', KEYS[1], at)
end
return 1
