-- Makes an ExclusiveLock's owner key ours after a transaction set its lock key (see
-- ops/exclusive_multi.rs), when the transaction could not: the owner key was there already
-- (left by a holder whose lock key another client deleted, or by an attempt that lost), or
-- it got an expiry a millisecond off the lock key's. The lock key must still be the one the
-- transaction set: our value, with the absolute expiry the transaction read.
-- KEYS[1] lock key, KEYS[2] owner key; ARGV[1] the lock key's value, ARGV[2] its absolute
-- expiry (ms) as the transaction read it, ARGV[3] owner token.
-- Returns 1 when both keys are ours on one expiry; 0 when the lock key changed since, and
-- then an owner key holding our token is deleted.
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('PEXPIRETIME', KEYS[1]) == tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[3], 'PXAT', ARGV[2])
  return 1
end
if redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('DEL', KEYS[2])
end
return 0
