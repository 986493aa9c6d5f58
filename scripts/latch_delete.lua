-- Delete a count-down latch: its count is zero from now, so awaiters are
-- told "0" and return (after the kind.lua and guard.lua preludes).
-- KEYS[1] count STRING <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1] channel redisson_countdownlatch__channel__{name}
-- ARGV[2..4] the guard's (guard.lua)
-- Returns {1} if it existed, else {0}.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  local existed = redis.call('del', KEYS[1])
  if existed == 1 then
    redis.call(PUBLISH, ARGV[1], '0')
  end
  return {existed}
end)
