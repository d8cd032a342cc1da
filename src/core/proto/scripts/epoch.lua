-- The incarnation of this server, as our clients first met it (proto/epoch.rs).
-- KEYS[1]: the epoch hash (\xffepoch); ARGV[1]: the run_id INFO server gave just before.
-- A run_id other than the one kept means a server our clients have not met since it started
-- (a restart with or without persistence, a promoted replica, a flush, a first use): it is
-- born now. Answers { born, now }, both in ms of the server's clock.
-- TIME before a write needs effects replication on Redis before 5 (a no-op since 7).
pcall(redis.replicate_commands)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local run = redis.call('HGET', KEYS[1], 'run')
local born = tonumber(redis.call('HGET', KEYS[1], 'born'))
if run ~= ARGV[1] or not born then
  redis.call('HSET', KEYS[1], 'run', ARGV[1], 'born', now)
  born = now
end
return { born, now }
