-- Take every available permit of a semaphore.
-- KEYS[1] permits STRING <name>
-- KEYS[2] request marker actorlock_request:{name}:<requestId>
-- ARGV[1] marker TTL ms
-- Returns how many were taken (0 when none or the count is negative); a
-- re-attempt returns the first result.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
local prior = redis.call('get', KEYS[2])
if prior then
  return tonumber(prior)
end
local available = tonumber(redis.call('get', KEYS[1]) or '0')
local taken = 0
if available > 0 then
  redis.call('set', KEYS[1], 0, 'keepttl')
  taken = available
end
redis.call('set', KEYS[2], taken, 'px', ARGV[1])
return taken
