-- Set a count-down latch's count if it is not set (Redisson's
-- RCountDownLatch layout), after the kind.lua and guard.lua preludes.
-- KEYS[1] count STRING <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1] count (> 0)
-- ARGV[2] channel redisson_countdownlatch__channel__{name}
-- ARGV[3..5] the guard's (guard.lua)
-- Returns {1} if set now (and "1", a new count, published), {0} if already
-- set.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then
    redis.call(PUBLISH, ARGV[2], '1')
    return {1}
  end
  return {0}
end)
