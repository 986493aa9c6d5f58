-- Available permits of a permit-expirable semaphore, after returning
-- expired ones to the pool (after the semaphore_expirable.lua prelude).
-- KEYS[1] permits STRING <name>
-- KEYS[2] {<name>}:timeout                 ZSET raw permit id -> expiry ms
-- KEYS[3] redisson__timeout__set:{<name>}  legacy ZSET, reclaimed only
-- ARGV[1] channel redisson_sc:{<name>}
-- Returns the count. Safe to re-run.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
reclaim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], now_ms())
return tonumber(redis.call('get', KEYS[1]) or '0')
