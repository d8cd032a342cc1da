-- Prepended to the attempts of a waiter's connection (acquire_queued.lua, join_ring.lua):
-- acquire.lua's attempt with the token as the lock's value, and what happens beside it when
-- the lock is won, in the same step.
-- KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the fence
-- counter's retention window in ms (see fence.lua). Fences are drawn two at a time, as in
-- acquire.lua. `won` runs once the lock is ours and numbered.
-- Returns {1, fence} when taken (or a NOFENCE error, nothing written), nil when held.
-- The lock is set, or its holder read, by one SET NX GET (Redis 7.0+): only an attempt sent
-- again needs the holder, and a separate GET would cost every failed attempt a command.
-- Refused (before 7.0 NX and GET do not go together; a key of another type), SET NX then GET.
local function set_or_holder()
  local holder = redis.pcall('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
  if type(holder) ~= 'table' then
    return holder
  end
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return false
  end
  return redis.pcall('GET', KEYS[1])
end
local function queued_attempt(won)
  keep_fences_forever(KEYS[2], ARGV[3])
  local holder = set_or_holder()
  if not holder then
    -- Drawn after the lock is written, in one INCRBY (see fence.lua): a counter that can give
    -- none takes the lock back, and the attempt fails with nothing written.
    local counter = draw_fences(KEYS[2], 2)
    if not counter then
      redis.call('DEL', KEYS[1])
      return no_fence()
    end
    keep_fences(KEYS[2], ARGV[2], ARGV[3])
    won()
    return {1, counter - 1}
  end
  -- Our own token: this attempt, sent again after its connection dropped under it.
  if holder == ARGV[1] then
    local drawn = fence_drawn(KEYS[2])
    if drawn then
      keep_fences(KEYS[2], ARGV[2], ARGV[3])
      return {1, drawn}
    end
    redis.call('DEL', KEYS[1])
    return no_fence()
  end
end
