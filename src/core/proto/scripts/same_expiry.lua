-- Shared by the scripts that check an ExclusiveLock's two keys (prepended to each).
-- Two keys set together share one absolute expiry; a lock key re-created or re-timed by
-- another client has its own.
-- How far apart (ms) two expiries set as one may drift: a Redis Cluster slot that moves
-- (MIGRATE) carries each key's remaining TTL, which the new node counts from when it
-- restores that key, so the two keys of a lock arrive apart by the difference of their
-- transfer times (keys migrated one by one, on a loaded host: tens of ms). Before Redis 7.0
-- it also covers the two clock reads of PTTL. Another client's expiry this close to ours
-- would have to be set within this window of our own write. Only where our owner key (our
-- token) stands beside the lock key: the expiry a transaction read is compared exactly.
local EXPIRY_SLACK = 50

-- Two expiries (or TTLs) as one: within the slack, or alike negative (none, or no key).
local function alike(x, y)
  if x < 0 or y < 0 then
    return x == y
  end
  return math.abs(x - y) <= EXPIRY_SLACK
end

local function same_expiry(a, b)
  local at = redis.pcall('PEXPIRETIME', a)
  if type(at) == 'number' then
    return alike(at, redis.call('PEXPIRETIME', b))
  end
  return alike(redis.call('PTTL', a), redis.call('PTTL', b))
end


-- Whether an ExclusiveLock's lock key `lock` is ours: it holds our `value`, and either the
-- owner key holds our `token` and shares the lock key's absolute expiry (the acquire script
-- and every refresh set both together; within the slack, as a slot's migration leaves
-- them), or, while the owner key is not ours (no refresh
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
  -- Exact: nothing of ours beside it proves it ours, and another client re-creating it
  -- moments after our transaction (a stale original's DEL, then its SET NX) is likely.
  local at = redis.pcall('PEXPIRETIME', lock)
  if type(at) ~= 'number' or at ~= tonumber(set_at) then
    return false
  end
  return not holder or not same_expiry(lock, owner)
end
