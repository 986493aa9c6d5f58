-- Release one permit of a permit-expirable semaphore (after the
-- semaphore_expirable.lua prelude).
-- KEYS[1] permits STRING <name>
-- KEYS[2] redisson__timeout__set:{name}  ZSET permit id -> expiry ms
-- KEYS[3] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] permit id
-- ARGV[2] channel redisson_sc:{name}
-- ARGV[3] marker TTL ms
-- Returns 1 released; 2 the permit had expired (it returns to the pool now);
-- 0 no such permit (expired and already returned, or never taken). A
-- re-attempt returns the first result.
local prior = redis.call('get', KEYS[3])
if prior then
  return tonumber(prior)
end
local now = now_ms()
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
local result = 0
if expiry then
  redis.call('zrem', KEYS[2], ARGV[1])
  local count = redis.call('incrby', KEYS[1], 1)
  redis.call(PUBLISH, ARGV[2], count)
  result = 1
  if tonumber(expiry) <= now then
    result = 2
  end
end
redis.call('set', KEYS[3], result, 'px', ARGV[3])
return result
