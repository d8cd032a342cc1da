-- Hand a lock we hold straight to a waiter of our own process: it never becomes free, so
-- nobody barges in between, and the waiter needs no request of its own.
-- The waiter's fence is the one kept for it when ours was drawn (every draw takes two, see
-- acquire.lua): ours + 1, known before this runs, so a waiter of our JS thread may start on
-- the strength of our lease while this is in flight (see ops/fast/handoff.rs). Nobody
-- else can have drawn it: the counter was already past it when we got ours.
-- KEYS[1] lock key, KEYS[2] fence counter; one hash slot.
-- ARGV[1] our token, ARGV[2] the waiter's fresh token, ARGV[3] its TTL in ms, ARGV[4] our
-- fence ('0' when unknown: the waiter then draws two, as an acquire does), ARGV[5] (optional)
-- the counter's upkeep: 'kept' when the client knows it outlives the waiter's lock by the
-- window already, else the window in ms; without it the counter keeps its margin over the
-- lock (see fence.lua).
-- Returns the waiter's fence, or 0 when the lock is no longer ours (nothing was changed).
local ours = tonumber(ARGV[4]) or 0
local upkeep = ARGV[5]
local by_window = upkeep ~= nil and upkeep ~= 'kept'
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  -- The waiter's fences, drawn in one INCRBY (see fence.lua): two when ours is unknown, as an
  -- acquire draws them; else one, so the counter keeps the next for the waiter's own
  -- handover. A counter that can give none releases the lock instead, and the waiter, told
  -- 0, tries for itself (and fails the same way).
  local counter = draw_fences(KEYS[2], ours == 0 and 2 or 1)
  if not counter then
    redis.call('DEL', KEYS[1])
    return 0
  end
  if upkeep == nil then
    keep_fences_past(KEYS[2], KEYS[1], ARGV[3])
  elseif by_window then
    keep_fences_handed(KEYS[2], ARGV[3], upkeep)
  end
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  if ours == 0 then
    return counter - 1
  end
  -- The counter was at ours + 1 at least, unless another client wrote to it.
  if counter < ours + 2 then
    -- As a decimal: Lua would print a large number in exponent form.
    -- KEEPTTL: the upkeep above gave the counter the expiry the client records.
    redis.call('SET', KEYS[2], string.format('%d', ours + 2), 'KEEPTTL')
  end
  return ours + 1
end
-- The waiter's token already: this handoff, sent again after its connection dropped under it.
if holder == ARGV[2] then
  -- Kept again as asked: a client that asked for a window counts on it from this reply.
  if by_window then
    keep_fences_handed(KEYS[2], ARGV[3], upkeep)
  end
  if ours > 0 then
    return ours + 1
  end
  return fence_drawn(KEYS[2]) or 0
end
return 0
