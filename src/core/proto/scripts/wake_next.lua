-- Pass a wake-up on: the connection it was meant for has nobody waiting any more.
-- KEYS[1] queue of waiting connections, ARGV[1] the lock's channel.
return wake_first(KEYS[1], ARGV[1]) and 1 or 0
