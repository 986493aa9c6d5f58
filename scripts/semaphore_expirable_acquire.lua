-- Take permits of a permit-expirable semaphore, all or none (after the
-- semaphore_expirable.lua prelude).
-- KEYS[1] permits STRING <name>
-- KEYS[2] {<name>}:timeout                 ZSET raw permit id -> expiry ms
-- KEYS[3] redisson__timeout__set:{<name>}  legacy ZSET, reclaimed only
-- ARGV[1] lease ms; <= 0: no expiry
-- ARGV[2] channel redisson_sc:{<name>}
-- ARGV[3] not after: the server clock in microseconds after which the
--   attempt does nothing (its call's deadline, as guard.lua's), or ""
-- ARGV[4..] permit ids (16 random raw bytes each, chosen by the caller), one
--   per permit wanted
-- Returns {1, expiry ms} when taken; {0, ms until the earliest permit held
-- expires (-1: none will)} when too few are available; {-9, 0} when it
-- arrived after its deadline and did nothing. As Redisson's tryAcquire, it
-- first returns expired permits to the pool, and gives the timeout ZSET the
-- TTL the permits key has. A re-attempt finds its first id in the ZSET and
-- does not take twice; if those permits expired before it arrived, they
-- are returned to the pool and taken afresh, so that a caller is never
-- handed a permit that anyone may reclaim. It has no duplicate guard (its
-- ids make it idempotent while they are held): its deadline is what keeps
-- an attempt from taking them again once they were released, since the
-- caller hands them out only when no attempt can act any more.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
local not_after = tonumber(ARGV[3])
if not_after then
  local t = redis.call('time')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) > not_after then
    return {-9, 0}
  end
end
local now = now_ms()
local held = redis.call('zscore', KEYS[2], ARGV[4])
if held and tonumber(held) > now then
  return {1, tonumber(held)}
end
if held then
  local back = 0
  for i = 4, #ARGV do
    back = back + redis.call('zrem', KEYS[2], ARGV[i])
  end
  local count = redis.call('incrby', KEYS[1], back)
  if count > 0 then
    redis.call(PUBLISH, ARGV[2], count)
  end
end
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[2], now)
local n = #ARGV - 3
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available >= n then
  redis.call('decrby', KEYS[1], n)
  local expiry = forever
  if tonumber(ARGV[1]) > 0 then
    expiry = now + tonumber(ARGV[1])
  end
  for i = 4, #ARGV do
    redis.call('zadd', KEYS[2], expiry, ARGV[i])
  end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return {1, expiry}
end
return {0, next_expiry(KEYS[2], KEYS[3], now)}
