-- Pass a wake-up on: the connection it was meant for has nobody waiting any more.
-- KEYS[1] queue of waiting connections, ARGV[1] the lock's channel.
local next = redis.pcall('ZPOPMIN', KEYS[1])
if type(next) == 'table' and next[1] then
  announce(ARGV[1], next[1])
  return 1
end
return 0
