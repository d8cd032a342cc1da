-- Prepended to every script that wakes a waiter: the wake goes out on sharded pub/sub where
-- the server has it (the channel is in the lock's hash slot), else on plain pub/sub;
-- subscribers pick the same way (see store.rs).
local function announce(channel, message)
  local sent = redis.pcall('SPUBLISH', channel, message)
  if type(sent) == 'table' and sent.err then
    redis.pcall('PUBLISH', channel, message)
  end
end
