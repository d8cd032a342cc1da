-- Undoes a transaction that set an ExclusiveLock's lock key (see ops/exclusive/multi.rs)
-- but did not end as a hold: its caller stopped waiting, or its owner key could not be
-- claimed. The lock key goes only if it is still the one the transaction set (our value,
-- with the absolute expiry the transaction read); the owner key only if it holds our token.
-- KEYS[1] lock key, KEYS[2] owner key; ARGV[1] the lock key's value, ARGV[2] its absolute
-- expiry (ms) as the transaction read it, ARGV[3] owner token.
-- Returns 1 when the lock key was deleted, else 0.
local dropped = 0
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('PEXPIRETIME', KEYS[1]) == tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  dropped = 1
end
if redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('DEL', KEYS[2])
end
return dropped
