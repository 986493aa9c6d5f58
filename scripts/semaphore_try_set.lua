-- Set a semaphore's permits if it has none set yet.
-- KEYS[1] permits STRING <name>
-- KEYS[2] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] permits
-- ARGV[2] channel redisson_sc:{name}
-- ARGV[3] marker TTL ms
-- Returns 1 if set now, 0 if already set; a re-attempt returns the first
-- result.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
local prior = redis.call('get', KEYS[2])
if prior then
  return tonumber(prior)
end
local set = 0
if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then
  redis.call(PUBLISH, ARGV[2], ARGV[1])
  set = 1
end
redis.call('set', KEYS[2], set, 'px', ARGV[3])
return set
