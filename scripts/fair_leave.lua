-- A waiter gives up its place in a fair lock's queue (after fair.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2] queue redisson_lock_queue:{name}
-- KEYS[3] timeouts redisson_lock_timeout:{name}
-- ARGV[1] owner
-- ARGV[2] wait validity ms
-- ARGV[3] channel prefix redisson_lock__channel:{name}
-- Everyone behind it moves one slot up. If it was the head of a free lock,
-- the new head is told, or it would wait for its deadline. Returns 1 if the
-- owner was queued, else 0.
local queue = redis.call('lrange', KEYS[2], 0, -1)
local found = false
for i, owner in ipairs(queue) do
  if found then
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), owner)
  elseif owner == ARGV[1] then
    found = i
  end
end
if not found then
  return 0
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if found == 1 and redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(PUBLISH, ARGV[3] .. ':' .. head, 0)
  end
end
return 1
