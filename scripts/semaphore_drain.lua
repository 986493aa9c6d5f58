-- Take every available permit of a semaphore (after the kind.lua and
-- guard.lua preludes).
-- KEYS[1] permits STRING <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1..3] the guard's (guard.lua)
-- Returns {how many were taken} (0 when none or the count is negative).
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  local available = tonumber(redis.call('get', KEYS[1]) or '0')
  if available > 0 then
    redis.call('set', KEYS[1], 0, 'keepttl')
    return {available}
  end
  return {0}
end)
