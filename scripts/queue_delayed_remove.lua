-- Remove the oldest pending item with this value from a delayed queue
-- (after the guard.lua prelude).
-- KEYS[1] redisson_delay_queue_timeout:{name}  ZSET
-- KEYS[2] redisson_delay_queue:{name}          LIST of members
-- KEYS[3], KEYS[4] the guard's (guard.lua)
-- ARGV[1] value
-- ARGV[2..4] the guard's (guard.lua)
-- Returns {1} if an item was removed, else {0}: one request never removes
-- a second duplicate.
return guarded(function()
  local chunk = 1000
  local from = 0
  local removed = 0
  while removed == 0 do
    local members = redis.call('lrange', KEYS[2], from, from + chunk - 1)
    for _, member in ipairs(members) do
      local ok, _, value = pcall(struct.unpack, 'Bc0Lc0', member)
      if ok and value == ARGV[1] then
        redis.call('lrem', KEYS[2], 1, member)
        redis.call('zrem', KEYS[1], member)
        removed = 1
        break
      end
    end
    if #members < chunk then
      break
    end
    from = from + chunk
  end
  return {removed}
end)
