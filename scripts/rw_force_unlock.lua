-- Delete a read-write lock held in the given mode, whoever holds it, and
-- wake all its waiters.
-- KEYS[1] lock HASH <name>
-- ARGV[1] mode: read or write
-- ARGV[2] channel redisson_rwlock:{name}
-- Returns 1 if a lock was deleted, 0 if it was not held in that mode.
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(PUBLISH, ARGV[2], 1)
return 1
