-- Add permits to a semaphore (a release, or AddPermits, which may be
-- negative) and tell waiters the new count (after the kind.lua and
-- guard.lua preludes).
-- KEYS[1] permits STRING <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1] permits to add
-- ARGV[2] channel redisson_sc:{name}
-- ARGV[3..5] the guard's (guard.lua)
-- Returns {1, the new count}: the count may be any integer, and a reply's
-- first element must never be one of guard.lua's own (NOT_RUN, LATE).
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  local count = redis.call('incrby', KEYS[1], ARGV[1])
  redis.call(PUBLISH, ARGV[2], count)
  return {1, count}
end)
