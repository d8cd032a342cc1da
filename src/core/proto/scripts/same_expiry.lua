-- Shared by the scripts that check an ExclusiveLock's two keys (prepended to each).
-- Two keys set together share one absolute expiry; a lock key re-created or re-timed by
-- another client has its own.
local function same_expiry(a, b)
  local at = redis.pcall('PEXPIRETIME', a)
  if type(at) == 'number' then
    return at == redis.call('PEXPIRETIME', b)
  end
  -- Before Redis 7.0: two clock reads microseconds apart.
  return math.abs(redis.call('PTTL', a) - redis.call('PTTL', b)) <= 5
end


-- Whether an ExclusiveLock's lock key `lock` is ours: it holds our `value`, and either the
-- owner key holds our `token` and shares the lock key's absolute expiry (the acquire script
-- and every refresh set both together), or, while the owner key is not ours (no refresh
-- wrote it yet), the lock key still has the absolute expiry our transaction gave it
-- (`set_at`, ms) and no other holder's owner key shares it. A lock key deleted or re-timed
-- by another client has an expiry of its own. Once the owner key is ours, `set_at` proves
-- nothing any more.
local function exclusive_ours(lock, owner, value, token, set_at)
  if redis.call('GET', lock) ~= value then
    return false
  end
  local holder = redis.call('GET', owner)
  if holder == token then
    return same_expiry(lock, owner)
  end
  if not set_at or set_at == '' then
    return false
  end
  local at = redis.pcall('PEXPIRETIME', lock)
  if type(at) ~= 'number' or at ~= tonumber(set_at) then
    return false
  end
  return not holder or not same_expiry(lock, owner)
end
