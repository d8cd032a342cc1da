-- Fences drawn for no acquisition, counted beside the lock's counter: a transaction that found
-- the lock held drew them all the same (proto/acquire.rs), and `watch` reads acquisitions from
-- the counter's growth less this count's. Its own key, never the counter: lowering the counter
-- could hand out a fence again (a resent attempt reads its fence from the counter,
-- fence.lua's `fence_drawn`; a Redlock's write-back raised it past a fence).
-- KEYS[1] the count (keys.rs `missed_key`); ARGV[1] fences drawn, ARGV[2] how long the count
-- lives past its last change, in ms: long enough for `watch` to read it between two frames.
-- Returns the count after.
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return count
