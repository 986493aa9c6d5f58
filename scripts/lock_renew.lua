-- Watchdog renewal of many locks in one call (all KEYS in one hash slot).
-- KEYS[i]   lock HASH
-- ARGV[1]   lease ms
-- ARGV[i+1] owner that must still hold KEYS[i]
-- Extends each lease whose owner still holds the lock; never re-creates a key
-- that vanished and never shortens a longer lease. Returns one entry per key:
-- 1 renewed, 0 gone (deleted, expired or taken by another owner).
local lease = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('hexists', key, ARGV[i + 1]) == 1 then
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    -- The fencing counter lives as long as the hold: a give-back tells by
    -- it whether a newer grant came (release.lua). (Same slot: its name
    -- carries the lock's as hash tag, or the lock's own tag.)
    local counter = 'redisson_lock_token:' .. (string.find(key, '{', 1, true) and key or '{' .. key .. '}')
    local left = redis.call('pttl', counter)
    if left >= 0 and left < lease then
      redis.call('pexpire', counter, lease)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
