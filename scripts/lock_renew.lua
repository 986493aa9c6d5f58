-- Watchdog renewal of many locks in one call (all KEYS in one hash slot;
-- after the reentrant.lua prelude).
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
    follow(counter_of(key), key)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
