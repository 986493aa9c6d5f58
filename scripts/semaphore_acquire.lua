-- Take permits of a semaphore (Redisson's RSemaphore layout).
-- KEYS[1] permits STRING <name>
-- KEYS[2] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] permits to take (> 0)
-- ARGV[2] marker TTL ms
-- Returns {1, permits left} when taken, {0, permits available} when too few.
-- A take leaves the marker, so a re-attempt after an unknown outcome does
-- not take twice; a refusal changes nothing and needs none.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
if redis.call('exists', KEYS[2]) == 1 then
  return {1, tonumber(redis.call('get', KEYS[1]) or '0')}
end
local n = tonumber(ARGV[1])
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available < n then
  return {0, available}
end
local left = redis.call('decrby', KEYS[1], n)
redis.call('set', KEYS[2], 1, 'px', ARGV[2])
return {1, left}
