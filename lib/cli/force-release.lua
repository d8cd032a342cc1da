-- An operator's forced release (`native-redis-lock release <key> --force`): deletes the lock
-- and what belongs to its holder, and moves the fence counter on, in one step, so a holder
-- that still believes it holds the lock is fenced out of every store that checks fences.
-- Only when the lock still holds the value the operator was shown: a lock that changed hands
-- since is somebody else's, and is left alone.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3..] the holder's other keys (owner, index).
-- ARGV[1] the value shown, ARGV[2] how far the counter moves (our APIs draw 2 per lock).
-- Returns {0} when the value changed, or {1, deleted keys, the counter after}.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
local deleted = 0
for i = 1, #KEYS do
  if i ~= 2 then
    deleted = deleted + redis.call('DEL', KEYS[i])
  end
end
-- A missing counter is not created: it would outlive every lock and its retention window.
local fence = false
if redis.call('EXISTS', KEYS[2]) == 1 then
  fence = redis.call('INCRBY', KEYS[2], ARGV[2])
end
return {1, deleted, fence}
