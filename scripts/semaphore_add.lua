-- Add permits to a semaphore (a release, or AddPermits, which may be
-- negative) and tell waiters the new count.
-- KEYS[1] permits STRING <name>
-- KEYS[2] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] permits to add
-- ARGV[2] channel redisson_sc:{name}
-- ARGV[3] marker TTL ms
-- Returns the new count; a re-attempt of the same request returns the first
-- result without adding again.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
local prior = redis.call('get', KEYS[2])
if prior then
  return tonumber(prior)
end
local count = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(PUBLISH, ARGV[2], count)
redis.call('set', KEYS[2], count, 'px', ARGV[3])
return count
