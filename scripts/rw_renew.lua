-- Watchdog renewal of read-write locks, many in one call (one hash slot;
-- after the reentrant.lua prelude).
-- KEYS[i] lock HASH
-- ARGV[1] lease ms; then four per key:
-- ARGV[4i-2] owner, ARGV[4i-1] its write field <owner>:write,
-- ARGV[4i] its read count, ARGV[4i+1] its read-hold key prefix
-- While owner still holds the lock (a read or the write), extends the lock
-- and the keys of the owner's own read holds, never another owner's (a
-- reader that died must expire). Never shortens (a read with a LeaseTime
-- longer than the lease keeps it), never re-creates. Returns one entry per
-- key: 0 gone, else 1 plus a mask of the owner's read-hold keys it carried
-- (up to its count now: keys beyond were released since the renewal was
-- sent) and found, bit n-1 for key n, keys 1 to 50. A key that expired
-- (its read's own LeaseTime ran out, or the renewal came late: Redis was
-- paused) is not renewed: a release deletes the owner's newest key
-- whichever read it releases, so the reads left are valid only as long as
-- their keys, which the runtime must not think longer than they are.
local lease = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local b = 4 * i - 2
  if redis.call('hexists', key, ARGV[b]) == 1 or redis.call('hexists', key, ARGV[b + 1]) == 1 then
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    follow(counter_of(key), key)
    local reads = math.min(tonumber(ARGV[b + 2]), tonumber(redis.call('hget', key, ARGV[b]) or '0'))
    local found, bit = 0, 1
    for n = 1, reads do
      local k = ARGV[b + 3] .. ':' .. n
      local left = redis.call('pttl', k)
      if left >= 0 then
        if left < lease then
          redis.call('pexpire', k, lease)
        end
        if n <= 50 then
          found = found + bit
        end
      end
      bit = bit * 2
    end
    out[i] = 1 + found
  else
    out[i] = 0
  end
end
return out
