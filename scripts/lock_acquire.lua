-- Acquire or re-enter a reentrant lock (after the guard.lua and
-- reentrant.lua preludes).
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3], KEYS[4] the guard's (guard.lua)
-- ARGV[1] lease ms
-- ARGV[2] owner
-- ARGV[3] fencing counter TTL ms, 0 = never expire
-- ARGV[4..6] the guard's (guard.lua)
-- Returns {1, holdCount, token, fresh, mark} when held (see grant), {0, pttl} when another owner holds it,
-- {-3} when a read-write lock holds the name.
return guarded(function()
  return grant(KEYS[1], KEYS[2], ARGV[2], tonumber(ARGV[1]), ARGV[3])
end)
