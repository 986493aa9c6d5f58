-- Extend the lease of a reentrant or fair lock held by one owner (Held.Extend;
-- after the reentrant.lua prelude).
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}, which follows the lock
-- ARGV[1] lease ms
-- ARGV[2] owner that must still hold KEYS[1]
-- Extends, never shortens (as re-entries and renewals do), so extensions,
-- re-entries and renewals of one owner commute. Returns 1 if the owner
-- holds the lock (its lease now lasts at least ARGV[1] ms), 0 if it is gone
-- (deleted, expired or taken by another owner); nothing is re-created.
local lease = tonumber(ARGV[1])
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return 0
end
if redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
follow(KEYS[2], KEYS[1])
return 1
