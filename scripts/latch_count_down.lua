-- Count a count-down latch down by one.
-- KEYS[1] count STRING <name>
-- KEYS[2] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] channel redisson_countdownlatch__channel__{name}
-- ARGV[2] marker TTL ms
-- Returns the new count (0 when it reached zero: the key is deleted and "0"
-- published; no key at all stays at 0). A re-attempt returns the first
-- result without counting down again.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
local prior = redis.call('get', KEYS[2])
if prior then
  return tonumber(prior)
end
local count = 0
if redis.call('exists', KEYS[1]) == 1 then
  count = redis.call('decr', KEYS[1])
  if count <= 0 then
    redis.call('del', KEYS[1])
    redis.call(PUBLISH, ARGV[1], '0')
    count = 0
  end
end
redis.call('set', KEYS[2], count, 'px', ARGV[2])
return count
