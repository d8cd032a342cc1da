-- The incarnation of this server, as our clients first met it (proto/epoch.rs).
-- KEYS[1]: the epoch hash (\xffepoch). The run_id is read here, not sent from an INFO before:
-- two commands could be answered by two servers (a reconnect between them), and a server
-- restarted with the hash of its predecessor would then be taken for it.
-- A run_id other than the one kept means a server our clients have not met since it started
-- (a restart with or without persistence, a promoted replica, a flush, a first use): it is
-- born now. Answers { born, now }, both in ms of the server's clock.
-- INFO and TIME before a write need effects replication on Redis before 5 (a no-op since 7).
pcall(redis.replicate_commands)
local id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
if not id then
  return redis.error_reply('ERR restartQuarantineMs: INFO server gave no run_id')
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local run = redis.call('HGET', KEYS[1], 'run')
local born = tonumber(redis.call('HGET', KEYS[1], 'born'))
if run ~= id or not born then
  redis.call('HSET', KEYS[1], 'run', id, 'born', now)
  born = now
end
return { born, now }
