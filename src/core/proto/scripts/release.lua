-- Delete the lock only while it is still ours: an expired lock that someone else took since
-- must survive our late release.
-- KEYS[1] the key holding our token; KEYS[2] (optional) the lock key beside it.
-- ARGV[1] owner token; ARGV[2] (with KEYS[2]) the value the lock key must hold; ARGV[3]
-- (optional) the lock key's absolute expiry as our transaction set it (see same_expiry.lua
-- for when the lock key is ours).
-- Returns 1 when our lock was deleted, 0 when it was gone or not ours.
if not KEYS[2] then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  return redis.call('DEL', KEYS[1])
end
if exclusive_ours(KEYS[2], KEYS[1], ARGV[2], ARGV[1], ARGV[3]) then
  redis.call('DEL', KEYS[2], KEYS[1])
  return 1
end
-- Our owner key beside a lock that is not ours (it ran out, and someone took it since).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 0
