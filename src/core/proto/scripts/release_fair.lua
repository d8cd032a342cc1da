-- Release a fair lock (`fair: true`) if it is still ours, and wake the next waiter in line
-- (only that one: the message names its connection and itself; see acquire_fair.lua for
-- the line). No handover: the next in line may be in another process.
-- KEYS[1] lock key, KEYS[2] the line, KEYS[3] liveness. ARGV[1] token, ARGV[2] the lock's
-- channel.
-- Returns 1 when our lock was deleted, 0 when it was gone or not ours.
-- Before any write: TIME below is not deterministic (Redis before 5 replicates scripts whole).
if redis.replicate_commands then
  redis.replicate_commands()
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- pcall: a user whose ACL allows no sorted sets or channels still releases; waiters poll.
while true do
  local head = redis.pcall('ZRANGE', KEYS[2], 0, 0)
  if type(head) ~= 'table' or not head[1] then
    return 1
  end
  local alive = tonumber(redis.pcall('ZSCORE', KEYS[3], head[1]))
  if alive and alive > now then
    announce(ARGV[2], head[1])
    return 1
  end
  redis.pcall('ZREM', KEYS[2], head[1])
  redis.pcall('ZREM', KEYS[3], head[1])
end
