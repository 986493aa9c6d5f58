-- Shared prelude of the permit-expirable semaphore scripts (prepended when
-- embedded). Layout, as Redisson 4.x's RPermitExpirableSemaphore:
--   <name>                STRING available permits
--   {<name>}:timeout      ZSET permit id (16 raw bytes) -> expiry ms
--   redisson_sc:{<name>}  channel: the new available count
-- Permits taken by actorlock before it used Redisson's layout sit in
--   redisson__timeout__set:{<name>}  ZSET permit id (32 hex chars) -> expiry
-- which these scripts still reclaim and release from (one release's grace:
-- drop it, and its key, once no such version can still be running). Nothing
-- is written there any more.
--
-- forever: the expiry Redisson gives a permit without lease.
-- batch: the most expired permits one call reclaims per set, which bounds a
--   call's work and unpack's argument count; the next call takes the rest.
-- now_ms(): the server clock in ms (one clock for every client; Redisson
--   sends its own clock, which only matters if clocks drift apart).
-- hex(raw): the legacy member of a raw id.
-- reclaim(permits, timeouts, legacy, channel, now): return expired permits
--   to the pool and, as Redisson does, publish the new count if positive;
--   returns how many.
-- next_expiry(timeouts, legacy, now): ms until the earliest expiring permit
--   returns, or -1 when none will.
local forever = 922337203685477
local batch = 1000

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function hex(raw)
  return (string.gsub(raw, '.', function(c) return string.format('%02x', string.byte(c)) end))
end

local function take_expired(set, now)
  local ids = redis.call('zrangebyscore', set, 0, now, 'limit', 0, batch)
  if #ids > 0 then
    redis.call('zrem', set, unpack(ids))
  end
  return #ids
end

local function reclaim(permits, timeouts, legacy, channel, now)
  local n = take_expired(timeouts, now) + take_expired(legacy, now)
  if n == 0 then
    return 0
  end
  local count = redis.call('incrby', permits, n)
  if count > 0 then
    redis.call(PUBLISH, channel, count)
  end
  return n
end

local function next_expiry(timeouts, legacy, now)
  local wait = -1
  for _, set in ipairs({timeouts, legacy}) do
    local head = redis.call('zrange', set, 0, 0, 'withscores')
    if head[1] and tonumber(head[2]) < forever then
      local w = math.max(tonumber(head[2]) - now, 0)
      if wait < 0 or w < wait then
        wait = w
      end
    end
  end
  return wait
end
