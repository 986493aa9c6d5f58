-- Append one item to a (blocking) queue LIST (after the kind.lua and
-- guard.lua preludes).
-- KEYS[1] LIST <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1] value
-- ARGV[2..4] the guard's (guard.lua)
-- Returns {1}.
local bad = wrong_kind(KEYS[1], 'list') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  redis.call('rpush', KEYS[1], ARGV[1])
  return {1}
end)
