-- Delete a count-down latch: its count is zero from now, so awaiters are
-- told "0" and return.
-- KEYS[1] count STRING <name>
-- KEYS[2] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] channel redisson_countdownlatch__channel__{name}
-- ARGV[2] marker TTL ms
-- Returns 1 if it existed, else 0; a re-attempt returns the first result.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
local prior = redis.call('get', KEYS[2])
if prior then
  return tonumber(prior)
end
local existed = redis.call('del', KEYS[1])
if existed == 1 then
  redis.call(PUBLISH, ARGV[1], '0')
end
redis.call('set', KEYS[2], existed, 'px', ARGV[2])
return existed
