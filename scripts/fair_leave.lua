-- A waiter gives up its place in a fair lock's queue (after guard.lua and
-- fair.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2] queue redisson_lock_queue:{name}
-- KEYS[3] timeouts redisson_lock_timeout:{name}
-- KEYS[4], KEYS[5] the guard's (guard.lua)
-- ARGV[1] owner
-- ARGV[2] channel prefix redisson_lock__channel:{name}
-- ARGV[3..5] the guard's (guard.lua)
-- Everyone behind it moves up by its slot (see fair.lua). If it was the
-- head of a free lock, the new head is told, or it would wait for its
-- deadline. Returns {1} if the owner was queued, else {0}.
return guarded(function()
  local at
  for i, owner in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
    if owner == ARGV[1] then
      at = i - 1
      break
    end
  end
  if not at then
    return {0}
  end
  local deadline = tonumber(redis.call('zscore', KEYS[3], ARGV[1]))
  if deadline then
    local ahead
    if at == 0 then
      ahead = now_ms() + math.max(redis.call('pttl', KEYS[1]), 0)
    else
      local prev = redis.call('lindex', KEYS[2], at - 1)
      ahead = tonumber(redis.call('zscore', KEYS[3], prev)) or deadline
    end
    move_up(KEYS[2], KEYS[3], at + 2, deadline - ahead, deadline)
  end
  redis.call('zrem', KEYS[3], ARGV[1])
  redis.call('lrem', KEYS[2], 0, ARGV[1])
  if at == 0 and redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
      redis.call(PUBLISH, ARGV[2] .. ':' .. head, 0)
    end
  end
  return {1}
end)
