-- A waiter of a fair lock gave up: it leaves the line. If it was first and the lock is
-- free, the next in line is told, as a release would have (see release_fair.lua).
-- KEYS[1] lock key, KEYS[2] the line, KEYS[3] liveness. ARGV[1] the waiter, ARGV[2] the
-- lock's channel.
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if head == ARGV[1] and redis.call('EXISTS', KEYS[1]) == 0 then
  local next = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if next then
    announce(ARGV[2], next)
  end
end
return 1
