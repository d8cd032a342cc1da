-- Delete the lock only while it is still ours: an expired lock that someone else took since
-- must survive our late release.
-- KEYS[1] the key holding our token; KEYS[2] (optional) the lock key beside it.
-- ARGV[1] owner token; ARGV[2] (with KEYS[2]) the value the lock key must hold.
-- With two keys the lock key is ours only if it holds our value and shares the owner key's
-- absolute expiry (both were set together; a lock re-created or re-timed by another client
-- has its own).
-- Returns 1 when our lock was deleted, 0 when it was gone or not ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if not KEYS[2] then
  return redis.call('DEL', KEYS[1])
end
if redis.call('GET', KEYS[2]) == ARGV[2] and same_expiry(KEYS[2], KEYS[1]) then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
redis.call('DEL', KEYS[1])
return 0
