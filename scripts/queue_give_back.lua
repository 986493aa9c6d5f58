-- Put an item popped for a consumer that gave up back at the head of its
-- queue, where it came from.
-- KEYS[1] LIST <name>
-- KEYS[2] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] value
-- ARGV[2] marker TTL ms
-- Returns 1 when pushed now, 0 when an earlier attempt of this request did.
local bad = wrong_kind(KEYS[1], 'list') if bad then return bad end -- one kind per name (kind.lua)
if redis.call('exists', KEYS[2]) == 1 then
  return 0
end
redis.call('lpush', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], 1, 'px', ARGV[2])
return 1
