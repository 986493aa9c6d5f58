-- Take one permit of a permit-expirable semaphore (after the
-- semaphore_expirable.lua prelude).
-- KEYS[1] permits STRING <name>
-- KEYS[2] redisson__timeout__set:{name}  ZSET permit id -> expiry ms
-- ARGV[1] permit id (random, chosen by the caller)
-- ARGV[2] lease ms; <= 0: no expiry
-- ARGV[3] channel redisson_sc:{name}
-- Returns {1, expiry ms} when taken; {0, ms until the earliest permit
-- expires (-1: none will)} when none is available. A re-attempt finds its id
-- in the ZSET and does not take twice.
local now = now_ms()
local held = redis.call('zscore', KEYS[2], ARGV[1])
if held then
  return {1, tonumber(held)}
end
reclaim(KEYS[1], KEYS[2], ARGV[3], now)
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available >= 1 then
  redis.call('decrby', KEYS[1], 1)
  local expiry = forever
  if tonumber(ARGV[2]) > 0 then
    expiry = now + tonumber(ARGV[2])
  end
  redis.call('zadd', KEYS[2], expiry, ARGV[1])
  return {1, expiry}
end
local head = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if head[1] and tonumber(head[2]) < forever then
  return {0, math.max(tonumber(head[2]) - now, 0)}
end
return {0, -1}
