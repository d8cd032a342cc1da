-- syncguard's isLocked: whether the record is live. With clean-up asked for, a record expired
-- more than 2 s ago (the guard, for clocks a little apart) is deleted with its index key, which
-- is named from the prefix as syncguard names it (never the fence counter).
-- KEYS[1] lock key. ARGV[1] the key prefix, ARGV[2] 'true' to clean up.
-- Returns 1 live, 0 not.
local held = record_at(KEYS[1])
if not held then
  return 0
end
local now = now_ms()
if live(held, now) then
  return 1
end
if ARGV[2] == 'true' and now - held.expiresAtMs > 2000 then
  redis.call('DEL', KEYS[1])
  if held.lockId then
    local prefix = ARGV[1]
    if string.sub(prefix, -1) ~= ':' then
      prefix = prefix .. ':'
    end
    redis.call('DEL', prefix .. 'id:' .. held.lockId)
  end
end
return 0
