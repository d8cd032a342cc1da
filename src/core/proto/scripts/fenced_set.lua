-- A fenced store: write only if no write with a higher fencing token has landed, so a
-- holder that paused past its TTL cannot overwrite what the next holder wrote.
-- KEYS[1] the guarded resource (a hash with fields value and fence)
-- ARGV[1] value, ARGV[2] fencing token (15-digit zero-padded: string order is numeric order)
-- Returns 1 when written, 0 when rejected as stale.
local seen = redis.call('HGET', KEYS[1], 'fence')
if seen and seen > ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2])
return 1
