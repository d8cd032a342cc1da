-- Release a lock that connections of other processes wait for, granting it in the same step
-- to the next of them in the lock's ring: the lock is never free, so nobody barges in, and
-- the grantee learns it from the message, with no attempt of its own. Only the grantee
-- listens on its grant channel, so the publish's receiver count says whether it is still
-- there: a connection that closed (its process killed) is taken out and the next tried, in
-- this same step. A grant holds for the claim only, until its grantee confirms it, so one
-- that lands anyway (a host gone, a message lost) keeps the lock that long at most.
-- KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] ring (a list of connection ids, the tail
-- next in line); all one hash slot.
-- ARGV[1] our token, ARGV[2] our fence ('0' when unknown), ARGV[3] the last fence of our
-- block (the fences after ours kept for this chain of grants), ARGV[4] the grant's fresh
-- token, ARGV[5] the claim in ms, ARGV[6] our connection id, ARGV[7] '1' when we leave the
-- ring too, ARGV[8] and ARGV[9] a grant channel before and after its connection id,
-- ARGV[10] the fence counter's retention window in ms, or '-' when the client knows the
-- counter kept BLOCK claims past now and the window (see fence.lua `keep_fences`), ARGV[11] the lock's
-- released channel, ARGV[12] '1' when the releasing connection has waiters of its own (it
-- wakes one itself, and the wake queue is left alone, as in release_wake.lua). KEYS[4] the
-- lock's wake queue (connections of ours that wait without grants, see release_wake.lua).
-- An empty ARGV[1] is a kick: the lock, if free (a quiet release let it go, see
-- wait/tenure.rs), is granted as ours would be.
-- Returns 0 when the lock was not ours (nothing changed), 1 when it was released (nobody in
-- the ring listens; the wake queue's first live connection, if any, is told, as
-- release_wake.lua would: a fleet that mixes both kinds must not leave it to its poll), 3 when
-- it was released for a connection of the wake queue (see YIELD_EVERY), {2, id, fence, last fence of its block} when granted to connection id.
local BLOCK = 1024
-- While the ring is not empty the lock is never free, and a process that does not take
-- grants would wait for good: every this many blocks drawn for grants (one per grant while
-- a grant's block is its fence alone), a release frees the lock for the first connection of
-- the wake queue instead, if one waits there.
local YIELD_EVERY = 64
-- A bound on the turns of one release, should an entry stand in the ring twice (LPOS keeps
-- that from happening): the script always ends.
local RING_TURNS_MAX = 100000

-- The grant's fence and the last of its block: the one after ours while our block lasts,
-- else a new block drawn in one INCRBY, past anything drawn before, so fences stay strictly
-- increasing per key. The counter is kept long enough for a chain through the whole block,
-- each grant living its claim unless confirmed (a confirm keeps the counter's margin, see
-- extend.lua). nil when the counter can give none. Third: this draw completed YIELD_EVERY
-- blocks.
local function grant_fences()
  local ours, last = tonumber(ARGV[2]) or 0, tonumber(ARGV[3]) or 0
  if ours > 0 and ours < last then
    return ours + 1, last, false
  end
  local after = draw_fences(KEYS[2], BLOCK)
  if not after then
    return nil
  end
  local low = math.max(after - BLOCK, last, ours)
  if low + BLOCK > FENCE_MAX then
    redis.call('INCRBY', KEYS[2], -BLOCK)
    return nil
  end
  if low + BLOCK > after then
    -- As a decimal: Lua would print a large number in exponent form.
    redis.call('SET', KEYS[2], string.format('%d', low + BLOCK))
  end
  keep_fences(KEYS[2], BLOCK * tonumber(ARGV[5]), ARGV[10])
  local every = BLOCK * YIELD_EVERY
  return low + 1, low + BLOCK, math.floor(after / every) ~= math.floor((after - BLOCK) / every)
end

-- Tells the first connection of the wake queue still there that the lock is free, skipping
-- the dead (see announce.lua `wake_first`); `false` when nobody waits there.
local function wake_queue()
  return wake_first(KEYS[4], ARGV[11])
end

-- Frees the lock for the first connection of the wake queue, if any waits there; `head`
-- goes back to the front of the ring, ungranted. Deleted first: a queue with nobody still
-- there leaves it deleted only until the grant that follows sets it again.
local function yield_to_queue()
  redis.call('DEL', KEYS[1])
  if not wake_queue() then
    return false
  end
  redis.pcall('RPUSH', KEYS[3], redis.pcall('LPOP', KEYS[3]))
  return true
end

local holder = redis.call('GET', KEYS[1])
-- The grant's token already: this release, sent again after its connection dropped under it.
if holder == ARGV[4] then
  return 1
end
if ARGV[1] == '' then
  if holder then
    return 0
  end
elseif holder ~= ARGV[1] then
  return 0
end
if ARGV[7] == '1' then
  redis.pcall('LREM', KEYS[3], 0, ARGV[6])
end
-- pcall: a user whose ACL allows no lists or channels still releases; waiters poll.
-- No LLEN first (a command on every release): each turn grants and returns, or removes its
-- head, except at our own entry, which stays; seeing it twice means the ring went round.
local fence, last
local passed_self = false
for _ = 1, RING_TURNS_MAX do
  -- The next in line goes to the back of it: a ring turns one step per grant.
  local head = redis.pcall('RPOPLPUSH', KEYS[3], KEYS[3])
  if type(head) ~= 'string' then
    break
  end
  if head == ARGV[6] then
    if passed_self then
      break
    end
    passed_self = true
  else
    if not fence then
      local yield
      fence, last, yield = grant_fences()
      if not fence then
        break
      end
      if yield and yield_to_queue() then
        return 3
      end
    end
    local message = string.format('%d %d %s %s', fence, last, ARGV[5], ARGV[4])
    if told(ARGV[8] .. head .. ARGV[9], message) > 0 then
      redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
      return {2, head, fence, last}
    end
    -- Nobody heard: that connection is gone, and so is its place.
    redis.pcall('LPOP', KEYS[3])
  end
end
-- Nobody in the ring took it (empty, all gone, or only us): free, for whoever waits without
-- grants. A kick comes here too, for a lock freed quietly with the queue left alone.
redis.call('DEL', KEYS[1])
if ARGV[12] ~= '1' then
  wake_queue()
end
return 1
