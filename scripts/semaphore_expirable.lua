-- Shared prelude of the permit-expirable semaphore scripts (prepended when
-- embedded). Layout, as Redisson's RPermitExpirableSemaphore:
--   <name>                         STRING available permits
--   redisson__timeout__set:{name}  ZSET permit id -> expiry ms
--   redisson_sc:{name}             channel, new available count
--
-- now_ms(): the server clock in ms (one clock for every client).
-- reclaim(permits, timeouts, channel, now): return expired permits to the
--   pool and tell waiters; returns how many.
-- forever: the expiry of a permit without a lease (Redisson's value).
local forever = 31536000000000

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function reclaim(permits, timeouts, channel, now)
  local expired = redis.call('zrangebyscore', timeouts, '-inf', now, 'limit', 0, 1000)
  if #expired == 0 then
    return 0
  end
  redis.call('zrem', timeouts, unpack(expired))
  local count = redis.call('incrby', permits, #expired)
  redis.call(PUBLISH, channel, count)
  return #expired
end
