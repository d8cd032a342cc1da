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

