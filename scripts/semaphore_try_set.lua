-- Set a semaphore's permits if it has none set yet (after the kind.lua and
-- guard.lua preludes).
-- KEYS[1] permits STRING <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1] permits
-- ARGV[2] channel redisson_sc:{name}
-- ARGV[3..5] the guard's (guard.lua)
-- Returns {1} if set now, {0} if already set.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then
    redis.call(PUBLISH, ARGV[2], ARGV[1])
    return {1}
  end
  return {0}
end)
