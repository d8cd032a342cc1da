-- Prepended to every script that draws fences. A fence is 15 decimal digits (see token.rs),
-- and two are drawn per acquisition (see acquire.lua). The counter must hold a whole number
-- that leaves room for `room` more; when it does not (another client wrote to it, or 10^15
-- fences were drawn) no fence can be given, and the acquisition fails before it writes.
local FENCE_MAX = 999999999999999
local function fence_counter(key, room)
  local value = redis.pcall('GET', key)
  if value == false then
    return 0
  end
  -- Only what INCRBY takes as a number (no sign, no leading zero), so every script and the
  -- transaction form agree on which counters are usable.
  if type(value) ~= 'string' or #value > 15 or not (value == '0' or string.match(value, '^[1-9]%d*$')) then
    return nil
  end
  local n = tonumber(value)
  if n > FENCE_MAX - room then
    return nil
  end
  return n
end
local function no_fence()
  return redis.error_reply('NOFENCE no fence can be drawn: the counter does not hold a whole number below 999999999999998')
end
-- The fence of an attempt that finds its own token set already (the same attempt, sent again
-- after its connection dropped under it): the one below the counter. `nil` when the counter
-- cannot be what that attempt left behind.
local function fence_drawn(key)
  local counter = fence_counter(key, 0)
  if counter and counter >= 2 then
    return counter - 1
  end
end
-- Draws `count` fences for a lock the script has just written, in one command: the counter
-- as it is after them, or nil, with the counter left as it was, when it cannot give them.
local function draw_fences(key, count)
  local after = redis.pcall('INCRBY', key, count)
  if type(after) ~= 'number' then
    return nil
  end
  if after < count or after > FENCE_MAX then
    redis.call('INCRBY', key, -count)
    return nil
  end
  return after
end
-- A counter outlives every lock it numbered by the retention window (README, "Fencing
-- tokens"): once a draw is done it is kept for `window` ms past a lock living `ttl` ms from
-- now, never for less than another holder or client asked. A counter without an expiry is
-- given one (it predates the window, or was kept forever by a client told 0). Pushed, it
-- goes a quarter window further, as a transaction pushes it (proto/acquire.rs `pushed_for`):
-- the acquisitions after it, until that quarter is used up, only read its TTL (pushed to
-- exactly what was needed, nearly every acquisition of a busy key pushed it again). It is
-- pushed once it would outlive the lock by less than an eighth more, so that a won attempt
-- tells its client the counter lives that eighth beyond its lock: the client's next
-- attempts, until the eighth is used up, send '-' as the window and skip even the read
-- (ops/kept_fences.rs `won_by_script`). '-' is never sent for a window of 0.
-- As a decimal: Lua would print a large number in exponent form.
local function keep_fences(key, ttl, window)
  if window == '0' or window == '-' then
    return
  end
  local want = tonumber(ttl) + tonumber(window)
  if redis.call('PTTL', key) < want + math.floor(tonumber(window) / 8) then
    redis.call('PEXPIRE', key, string.format('%d', want + math.floor(tonumber(window) / 4)))
  end
end
-- A counter kept forever ('0') loses its expiry before the script writes anything, so a user
-- whose ACL refuses PERSIST gets an error and no lock, rather than a lock and an error.
local function keep_fences_forever(key, window)
  if window == '0' then
    redis.call('PERSIST', key)
  end
end
-- A watchdog's refresh giving the lock `ttl` ms anew: the counter kept `window` ms past it,
-- pushed a quarter window further whenever it is pushed, so that nearly every refresh only
-- reads its TTL. One without an expiry (kept forever, or from before windows; acquisitions
-- see to those) or gone is left as it is.
local function keep_fences_refreshed(key, ttl, window)
  if window == '0' then
    return
  end
  local want = tonumber(ttl) + tonumber(window)
  local left = redis.call('PTTL', key)
  if left >= 0 and left < want then
    redis.call('PEXPIRE', key, string.format('%d', want + math.floor(tonumber(window) / 4)))
  end
end
-- A handover's upkeep, sent only when the client cannot tell that the counter outlives the
-- waiter's lock (`ttl` ms from now) by `window` ms already (see ops/kept_fences.rs): kept a
-- quarter window beyond that, which the client then knows, so that the handovers after it
-- need not touch the counter until that quarter is used up. One without an expiry (kept
-- forever, or from before windows) is given one, as `keep_fences` gives it: the client
-- records the counter kept until then, and a later attempt's `PEXPIRE NX` would otherwise
-- give it a shorter one.
local function keep_fences_handed(key, ttl, window)
  local want = tonumber(ttl) + tonumber(window) + math.floor(tonumber(window) / 4)
  if redis.call('PTTL', key) < want then
    redis.call('PEXPIRE', key, string.format('%d', want))
  end
end
-- Before a held lock is given `ttl` ms anew (extend, a handover sent without a window): the
-- counter keeps the margin it has over the lock, so a long hold never outlives it. One
-- without an expiry is kept forever, one gone (deleted by someone else) stays gone.
local function keep_fences_past(key, lock, ttl)
  local left = redis.call('PTTL', key)
  local lock_left = redis.call('PTTL', lock)
  if left < 0 or lock_left < 0 then
    return
  end
  local want = tonumber(ttl) + left - lock_left
  if want > left then
    redis.call('PEXPIRE', key, string.format('%d', want))
  end
end
