-- Take or re-enter a read hold of a read-write lock (after reentrant.lua).
-- KEYS[1] lock HASH <name>: mode = read|write, <owner> = read holds,
--         <owner>:write = write holds
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease ms
-- ARGV[2] owner
-- ARGV[3] owner's write field <owner>:write (a writer may also read:
--         downgrade)
-- ARGV[4] read-hold key prefix {name}:<owner>:rwlock_timeout; hold n is
--         bounded by key <prefix>:<n>
-- ARGV[5] owner's read count as last known, "" on a first attempt
-- ARGV[6] fencing counter TTL ms, 0 = never expire
-- ARGV[7] fencing token of the grant that made the owner's read hold number
--         ARGV[5], as last known; "" if none. Read hold n's key holds the
--         token of the grant that wrote it: a key rewritten since means an
--         earlier attempt took effect after the owner's holds were deleted
--         (the count then looks unchanged). Other readers move the fencing
--         counter, so it cannot tell, as it does for the write lock.
-- Returns {1, readCount, token, writeCount}, {0, pttl of the lock}, or {-3}
-- when the hash has no mode: a reentrant or fair lock holds the name.
-- writeCount, the owner's write holds, tells a writer whose write was
-- deleted under it that this read is a fresh hold, not a downgrade.
local lease = tonumber(ARGV[1])
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode and redis.call('exists', KEYS[1]) == 1 then
  return {-3}
end
local writes = 0
if mode == 'write' then
  writes = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or '0')
  if writes == 0 then
    return {0, redis.call('pttl', KEYS[1])}
  end
end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
local seen, last = tonumber(ARGV[5]), tonumber(ARGV[7])
local token
if last and seen and seen > 0 and count == seen then
  local written = tonumber(redis.call('get', ARGV[4] .. ':' .. count))
  if written and written > 1 and written ~= last then
    token = written -- an earlier attempt's grant
  end
end
if not token then
  if not (seen and count == seen + 1) then
    count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  end
  token = next_token(KEYS[2], ARGV[6])
end
-- '%.0f': a 16-digit Lua number would go to Redis in exponent form.
redis.call('set', ARGV[4] .. ':' .. count, string.format('%.0f', token), 'px', lease)
if redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
return {1, count, token, writes}
