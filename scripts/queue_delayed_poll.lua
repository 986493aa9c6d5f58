-- Take the oldest item (insertion order) of a delayed queue, due or not.
-- KEYS[1] redisson_delay_queue_timeout:{name}  ZSET
-- KEYS[2] redisson_delay_queue:{name}          LIST of members
-- Returns the item's value, or nil when the queue is empty.
local member = redis.call('lpop', KEYS[2])
if not member then
  return false
end
redis.call('zrem', KEYS[1], member)
local ok, _, value = pcall(struct.unpack, 'Bc0Lc0', member)
if ok and type(value) == 'string' then
  return value
end
return member
