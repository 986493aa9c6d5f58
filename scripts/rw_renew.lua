-- Watchdog renewal of read-write locks, many in one call (one hash slot;
-- after the reentrant.lua prelude).
-- KEYS[i] lock HASH
-- ARGV[1] lease ms; then four per key:
-- ARGV[4i-2] owner, ARGV[4i-1] its write field <owner>:write,
-- ARGV[4i] its read count, ARGV[4i+1] its read-hold key prefix
-- While owner still holds the lock (a read or the write), extends the lock
-- and the keys of the owner's own read holds, never another owner's (a
-- reader that died must expire). Never shortens, never re-creates. Returns
-- one entry per key: 1 renewed, 0 gone.
local lease = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local b = 4 * i - 2
  if redis.call('hexists', key, ARGV[b]) == 1 or redis.call('hexists', key, ARGV[b + 1]) == 1 then
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    follow(counter_of(key), key)
    for n = 1, tonumber(ARGV[b + 2]) do
      redis.call('pexpire', ARGV[b + 3] .. ':' .. n, lease)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
