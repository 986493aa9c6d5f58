-- Offer one item to a delayed queue (Redisson's RDelayedQueue layout), after
-- the kind.lua and guard.lua preludes.
-- KEYS[1] redisson_delay_queue_timeout:{name}  ZSET member -> due ms
-- KEYS[2] redisson_delay_queue:{name}          LIST of members, insertion order
-- KEYS[3] destination LIST <name>, only checked (one kind per name)
-- KEYS[4], KEYS[5] the guard's (guard.lua)
-- ARGV[1] member: byte 8, 8 random bytes, 8-byte little-endian length, value
-- ARGV[2] delay ms (>= 0)
-- ARGV[3] channel redisson_delay_queue_channel:{name}
-- ARGV[4..6] the guard's (guard.lua)
-- Returns {1}: the guard makes the offer act once, however many of its
-- attempts arrive and whatever became of the item meanwhile (moved, polled,
-- removed, cleared).
local bad = wrong_kind(KEYS[3], 'list') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  -- One clock for every producer: the server's.
  local t = redis.call('time')
  local due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
  redis.call('zadd', KEYS[1], due, ARGV[1])
  -- The move script takes items due together in this, the offer order.
  redis.call('rpush', KEYS[2], ARGV[1])
  -- Movers only need telling when the earliest due time changed.
  local head = redis.call('zrange', KEYS[1], 0, 0)
  if head[1] == ARGV[1] then
    redis.call(PUBLISH, ARGV[3], string.format('%d', due))
  end
  return {1}
end)
