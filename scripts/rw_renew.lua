-- Watchdog renewal of read-write locks, many in one call (one hash slot;
-- after the reentrant.lua prelude).
-- KEYS[i] lock HASH
-- ARGV[1] lease ms; then four per key:
-- ARGV[4i-2] owner, ARGV[4i-1] its write field <owner>:write,
-- ARGV[4i] its read count, ARGV[4i+1] its read-hold key prefix
-- While owner still holds the lock (a read or the write), extends the lock
-- and the keys of the owner's own read holds, never another owner's (a
-- reader that died must expire). Never shortens, never re-creates. Returns
-- one entry per key: 1 renewed, 0 gone. A read hold whose key expired
-- (the renewal came late: Redis was paused) is gone although the lock
-- lives on for the owner's other holds: a release of the owner deletes its
-- newest key, and with only dead keys left, the lock. Then nothing is
-- renewed, and the owner's holds are gone. (Keys beyond the owner's count
-- now were released since the renewal was sent.)
local lease = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local b = 4 * i - 2
  local held = redis.call('hexists', key, ARGV[b]) == 1 or redis.call('hexists', key, ARGV[b + 1]) == 1
  local reads = math.min(tonumber(ARGV[b + 2]), tonumber(redis.call('hget', key, ARGV[b]) or '0'))
  for n = 1, reads do
    if held and redis.call('exists', ARGV[b + 3] .. ':' .. n) == 0 then
      held = false
    end
  end
  if held then
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    follow(counter_of(key), key)
    for n = 1, reads do
      redis.call('pexpire', ARGV[b + 3] .. ':' .. n, lease)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
