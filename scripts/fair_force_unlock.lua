-- Delete a fair lock whoever holds it and tell the queue's head.
-- KEYS[1] lock HASH <name>
-- KEYS[2] queue redisson_lock_queue:{name}
-- ARGV[1] channel prefix redisson_lock__channel:{name}
-- Returns 1 if a lock was deleted, 0 if it was free.
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
local head = redis.call('lindex', KEYS[2], 0)
if head then
  redis.call(PUBLISH, ARGV[1] .. ':' .. head, 0)
end
return 1
