-- Push back the TTL of many locks at once, each only while it is still ours: what one tick
-- of the watchdog sends for the locks due (one call instead of one per lock: the script's
-- own cost, for Redis and for the client, is paid once).
-- KEYS[i] a lock key, KEYS[n + i] its fence counter (kept past it, see fence.lua), ARGV[i]
-- the token it must hold, ARGV[n + i] its TTL in ms, ARGV[2n + i] its counter's retention
-- window in ms, for n locks.
-- Returns one character per lock, in order: '1' pushed back, '0' gone or not ours.
local n = #KEYS / 2
local out = {}
for i = 1, n do
  -- pcall: a key of another type is not ours, and must not fail the others' refresh.
  if redis.pcall('GET', KEYS[i]) == ARGV[i] then
    keep_fences_refreshed(KEYS[n + i], ARGV[n + i], ARGV[2 * n + i])
    redis.call('PEXPIRE', KEYS[i], ARGV[n + i])
    out[i] = '1'
  else
    out[i] = '0'
  end
end
return table.concat(out)
