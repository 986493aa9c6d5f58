-- Count a count-down latch down by one (after the kind.lua and guard.lua
-- preludes).
-- KEYS[1] count STRING <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1] channel redisson_countdownlatch__channel__{name}
-- ARGV[2..4] the guard's (guard.lua)
-- Returns {the new count} (0 when it reached zero: the key is deleted and
-- "0" published; no key at all stays at 0).
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  if redis.call('exists', KEYS[1]) == 0 then
    return {0}
  end
  local count = redis.call('decr', KEYS[1])
  if count <= 0 then
    redis.call('del', KEYS[1])
    redis.call(PUBLISH, ARGV[1], '0')
    count = 0
  end
  return {count}
end)
