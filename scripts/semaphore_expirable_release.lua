-- Release permits of a permit-expirable semaphore (after the kind.lua,
-- guard.lua and semaphore_expirable.lua preludes).
-- KEYS[1] permits STRING <name>
-- KEYS[2] {<name>}:timeout                 ZSET raw permit id -> expiry ms
-- KEYS[3] redisson__timeout__set:{<name>}  legacy ZSET (hex ids)
-- KEYS[4], KEYS[5] the guard's (guard.lua)
-- ARGV[1] channel redisson_sc:{<name>}
-- ARGV[2..#ARGV-3] raw permit ids
-- ARGV[#ARGV-2..] the guard's (guard.lua)
-- Returns {released, expired, unknown}: permits released within their
-- lease; permits found past their lease (they return to the pool now); ids
-- not held (expired and reclaimed already, released, or never taken). Every
-- id found goes back, and the new count is published, as Redisson's release
-- does.
local bad = wrong_kind(KEYS[1], 'string') if bad then return bad end -- one kind per name (kind.lua)
return guarded(function()
  local now = now_ms()
  local released, expired, unknown = 0, 0, 0
  for i = 2, #ARGV - 3 do
    local set, id = KEYS[2], ARGV[i]
    local expiry = redis.call('zscore', set, id)
    if not expiry then
      set, id = KEYS[3], hex(ARGV[i])
      expiry = redis.call('zscore', set, id)
    end
    if not expiry then
      unknown = unknown + 1
    else
      redis.call('zrem', set, id)
      if tonumber(expiry) <= now then
        expired = expired + 1
      else
        released = released + 1
      end
    end
  end
  if released + expired > 0 then
    local count = redis.call('incrby', KEYS[1], released + expired)
    redis.call(PUBLISH, ARGV[1], count)
  end
  return {released, expired, unknown}
end)
