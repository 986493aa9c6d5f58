-- Set a new lease on a held permit of a permit-expirable semaphore, counted
-- from now (after the semaphore_expirable.lua prelude).
-- KEYS[1] permits STRING <name>
-- KEYS[2] {<name>}:timeout                 ZSET raw permit id -> expiry ms
-- KEYS[3] redisson__timeout__set:{<name>}  legacy ZSET (hex ids)
-- ARGV[1] raw permit id
-- ARGV[2] lease ms; <= 0: no expiry
-- ARGV[3] channel redisson_sc:{<name>}
-- Returns the new expiry ms, or 0 when the permit is not held (its lease ran
-- out, it was released, or never taken). As Redisson's updateLeaseTime, it
-- returns expired permits to the pool first, so an expired permit cannot be
-- revived. A permit found in the legacy ZSET moves to the new one. Safe to
-- re-run.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
local now = now_ms()
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[3], now)
local expiry = forever
if tonumber(ARGV[2]) > 0 then
  expiry = now + tonumber(ARGV[2])
end
if redis.call('zscore', KEYS[2], ARGV[1]) or redis.call('zrem', KEYS[3], hex(ARGV[1])) == 1 then
  redis.call('zadd', KEYS[2], expiry, ARGV[1])
  return expiry
end
return 0
