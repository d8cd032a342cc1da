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


-- Whether an ExclusiveLock's lock key `lock` is ours: it holds our `value`, and either still
-- has the absolute expiry our transaction gave it (`set_at`, ms; it was not refreshed
-- since), or shares the owner key's while the owner key holds our `token` (the acquire
-- script and every refresh set both together). A lock key deleted or re-timed by another
-- client has an expiry of its own.
local function exclusive_ours(lock, owner, value, token, set_at)
  if redis.call('GET', lock) ~= value then
    return false
  end
  if set_at and set_at ~= '' then
    local at = redis.pcall('PEXPIRETIME', lock)
    if type(at) == 'number' and at == tonumber(set_at) then
      return true
    end
  end
  return redis.call('GET', owner) == token and same_expiry(lock, owner)
end
