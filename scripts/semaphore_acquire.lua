-- Take permits of a semaphore (Redisson's RSemaphore layout), after the
-- kind.lua and guard.lua preludes.
-- KEYS[1] permits STRING <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1] permits to take (> 0)
-- ARGV[2..4] the guard's (guard.lua)
-- Returns {1, permits left} when taken, {0, permits available} when too few.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  local n = tonumber(ARGV[1])
  local available = tonumber(redis.call('get', KEYS[1]) or '0')
  if available < n then
    return {0, available}
  end
  return {1, redis.call('decrby', KEYS[1], n)}
end)
