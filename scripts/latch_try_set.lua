-- Set a count-down latch's count if it is not set (Redisson's
-- RCountDownLatch layout).
-- KEYS[1] count STRING <name>
-- KEYS[2] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] count (> 0)
-- ARGV[2] channel redisson_countdownlatch__channel__{name}
-- ARGV[3] marker TTL ms
-- Returns 1 if set now (and "1", a new count, published), 0 if already set;
-- a re-attempt returns the first result.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
local prior = redis.call('get', KEYS[2])
if prior then
  return tonumber(prior)
end
local set = 0
if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then
  redis.call(PUBLISH, ARGV[2], '1')
  set = 1
end
redis.call('set', KEYS[2], set, 'px', ARGV[3])
return set
