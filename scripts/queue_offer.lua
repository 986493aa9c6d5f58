-- Offer one item to a delayed queue (Redisson's RDelayedQueue layout).
-- KEYS[1] redisson_delay_queue_timeout:{name}  ZSET member -> due ms
-- KEYS[2] redisson_delay_queue:{name}          LIST of members, insertion order
-- KEYS[3] request marker actorlock_request:{name}:<requestId>
-- KEYS[4] destination LIST <name>, only checked (one kind per name)
-- ARGV[1] member: byte 8, 8 random bytes, 8-byte little-endian length, value
-- ARGV[2] delay ms (>= 0)
-- ARGV[3] channel redisson_delay_queue_channel:{name}
-- ARGV[4] marker TTL ms
-- Returns 1 when offered now, 0 when an earlier attempt of this request did.
--
-- Idempotent on the member (its random id comes from the caller), so that a
-- re-attempt after an unknown outcome never enqueues twice: a member still
-- pending is found in the ZSET. An item due within the marker TTL could have
-- been moved out before the re-attempt arrives, so such offers also leave a
-- short-lived marker.
local bad = wrong_kind(KEYS[4], 'list') if bad then return bad end -- one kind per name (kind.lua)
if redis.call('exists', KEYS[3]) == 1 or redis.call('zscore', KEYS[1], ARGV[1]) then
  return 0
end
-- One clock for every producer: the server's.
local t = redis.call('time')
local due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
redis.call('zadd', KEYS[1], due, ARGV[1])
redis.call('rpush', KEYS[2], ARGV[1])
if tonumber(ARGV[2]) <= tonumber(ARGV[4]) then
  redis.call('set', KEYS[3], 1, 'px', ARGV[4])
end
-- Movers only need telling when the earliest due time changed.
local head = redis.call('zrange', KEYS[1], 0, 0)
if head[1] == ARGV[1] then
  redis.call(PUBLISH, ARGV[3], string.format('%d', due))
end
return 1
