-- Acquire or re-enter a reentrant lock (after the reentrant.lua prelude).
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease ms
-- ARGV[2] owner
-- ARGV[3] owner's hold count as last known, "" on a first attempt (see grant)
-- ARGV[4] fencing counter TTL ms, 0 = never expire
-- Returns {1, holdCount, token} when held, {0, pttl} when another owner holds it,
-- {-3} when a read-write lock holds the name.
return grant(KEYS[1], KEYS[2], ARGV[2], tonumber(ARGV[1]), tonumber(ARGV[3]), ARGV[4])
