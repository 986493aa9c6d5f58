-- Take or re-enter a read hold of a read-write lock (after guard.lua and
-- reentrant.lua).
-- KEYS[1] lock HASH <name>: mode = read|write, <owner> = read holds,
--         <owner>:write = write holds
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3], KEYS[4] the guard's (guard.lua)
-- ARGV[1] lease ms
-- ARGV[2] owner
-- ARGV[3] owner's write field <owner>:write (a writer may also read:
--         downgrade)
-- ARGV[4] read-hold key prefix {name}:<owner>:rwlock_timeout; hold n is
--         bounded by key <prefix>:<n>, which holds the grant's token
-- ARGV[5] fencing counter TTL ms, 0 = never expire
-- ARGV[6..8] the guard's (guard.lua)
-- Returns {1, readCount, token, fresh, token, writeCount} (a read's
-- give-back checks its own key's token: its mark is its token), {0, pttl
-- of the lock},
-- or {-3} when the hash has no mode: a reentrant or fair lock holds the
-- name. fresh is 1 when the lock did not exist; writeCount, the owner's
-- write holds, tells a writer whose write was deleted under it that this
-- read is a fresh hold, not a downgrade.
return guarded(function()
  local lease = tonumber(ARGV[1])
  local mode = redis.call('hget', KEYS[1], 'mode')
  if not mode and redis.call('exists', KEYS[1]) == 1 then
    return {-3}
  end
  local writes, fresh = 0, 0
  if mode == 'write' then
    writes = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or '0')
    if writes == 0 then
      return {0, redis.call('pttl', KEYS[1])}
    end
  end
  if not mode then
    redis.call('hset', KEYS[1], 'mode', 'read')
    fresh = 1
  end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local token = next_token(KEYS[2], ARGV[5])
  -- '%.0f': a 16-digit Lua number would go to Redis in exponent form.
  redis.call('set', ARGV[4] .. ':' .. count, string.format('%.0f', token), 'px', lease)
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  follow(KEYS[2], KEYS[1])
  return {1, count, token, fresh, token, writes}
end)
