-- Delete a lock whoever holds it and wake its waiters.
-- KEYS[1] lock HASH <name>
-- ARGV[1] channel redisson_lock__channel:{name}
-- Returns 1 if a lock was deleted, 0 if it was free.
if redis.call('del', KEYS[1]) == 1 then
  redis.call(PUBLISH, ARGV[1], 0)
  return 1
end
return 0
