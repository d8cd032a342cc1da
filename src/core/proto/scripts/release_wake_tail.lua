-- The end of release_wake.lua, once announce.lua's helpers are defined: `popped` is the
-- first member it took off the queue.
wake_first(KEYS[2], ARGV[2], popped[1])
return 1
