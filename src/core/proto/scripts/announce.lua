-- Part of every script that wakes a waiter (prepended, except in release_wake, whose hot
-- path comes first so that a release with nobody queued defines none of this): the wake goes
-- out on sharded pub/sub where the server has it (the channel is in the lock's hash slot),
-- else on plain pub/sub; subscribers pick the same way (see store.rs).
local function announce(channel, message)
  local sent = redis.pcall('SPUBLISH', channel, message)
  if type(sent) == 'table' and sent.err then
    redis.pcall('PUBLISH', channel, message)
  end
end

-- How many connections heard `message` on `channel`, on sharded pub/sub where the server has
-- it (as `announce`).
local function told(channel, message)
  local heard = redis.pcall('SPUBLISH', channel, message)
  if type(heard) == 'table' then
    heard = redis.pcall('PUBLISH', channel, message)
  end
  return type(heard) == 'number' and heard or 0
end

-- Wakes the first connection of a lock's wake queue (sorted set `queue`) that is still
-- there; `channel` is the lock's released channel. A member ending in '!' is a connection
-- listening on its own wake channel (the released channel with `released` replaced by
-- `wake:<id>`, see keys.rs): it alone listens there, so the receiver count tells whether it
-- is alive (one server counts every subscriber; Cluster stores never queue so), and one that
-- is gone (its process killed) is dropped and the next tried in this same step, so a dead
-- waiter cannot swallow the wake. Any other member is told on `channel`, as before: no
-- receiver count can single it out there. `popped`, when given, is the member a caller
-- already took off the queue (release_wake.lua pops before it defines these helpers).
-- Returns whether one was told.
local function wake_first(queue, channel, popped)
  -- Built at the first member that needs them: most wakes (and every release of a lock
  -- nobody waits for) need neither.
  local before, after
  while true do
    local member = popped
    popped = nil
    if not member then
      -- pcall: a user whose ACL allows no sorted sets or channels still releases; waiters poll.
      local next = redis.pcall('ZPOPMIN', queue)
      if type(next) ~= 'table' or not next[1] then
        return false
      end
      member = next[1]
    end
    if string.sub(member, -1) ~= '!' then
      announce(channel, member)
      return true
    end
    if not before then
      -- The tag holds no '}', and one separator byte follows it; 8 is #'released'.
      local close = string.find(channel, '}', 1, true) or 0
      before = string.sub(channel, 1, close + 1) .. 'wake:'
      after = string.sub(channel, close + 2 + 8)
    end
    if told(before .. string.sub(member, 1, -2) .. after, member) > 0 then
      return true
    end
  end
end
