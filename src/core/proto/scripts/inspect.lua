-- The holder's contents and remaining TTL, read in one step (the original's MULTI GET PTTL;
-- a script needs only EVALSHA permission, and avoids the client's MULTI path).
-- KEYS[1] lock key. Returns {value or nil, pttl}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
