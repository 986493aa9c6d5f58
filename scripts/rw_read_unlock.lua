-- Release read holds of a read-write lock (after guard.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2], KEYS[3] the guard's (guard.lua)
-- ARGV[1] owner
-- ARGV[2] holds to release: 1, or the whole count when the owner goes away
-- ARGV[3] channel redisson_rwlock:{name}
-- ARGV[4] "" or a read count: act only if the owner's count equals it
-- ARGV[5] owner's read-hold key prefix {name}:<owner>:rwlock_timeout
-- ARGV[6] prefix of every owner's read-hold keys: {name}
-- ARGV[7] "" or a fencing token: act only if the owner's newest read-hold
--         key (numbered by its count) holds no other token, so that a
--         give-back spares a fresh read of the same owner id taken since
--         (a read's token is in its key; the counter moves with others')
-- ARGV[8..10] the guard's (guard.lua)
-- While other holds remain, the lock lives as long as its longest live read
-- hold: the read-hold keys of a reader that died have expired, so it stops
-- counting, and once no live hold remains the lock is deleted, dead readers
-- and all. Returns {1, heard} lock freed (readers' waiters told, "0"),
-- {0} still held, {-1} not a reader, {-2} count or token differs from
-- ARGV[4], ARGV[7].
return guarded(function()
  local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
  local mode = redis.call('hget', KEYS[1], 'mode')
  if count == 0 or not mode then
    return {-1}
  end
  local expect = tonumber(ARGV[4])
  if expect and count ~= expect then
    return {-2}
  end
  if ARGV[7] ~= '' then
    local token = redis.call('get', ARGV[5] .. ':' .. count)
    if token and token ~= ARGV[7] then
      return {-2}
    end
  end
  local holds = math.min(tonumber(ARGV[2]), count)
  for i = count, count - holds + 1, -1 do
    redis.call('del', ARGV[5] .. ':' .. i)
  end
  if count > holds then
    redis.call('hincrby', KEYS[1], ARGV[1], -holds)
  else
    redis.call('hdel', KEYS[1], ARGV[1])
  end
  if redis.call('hlen', KEYS[1]) > 1 then
    if mode == 'write' then
      -- The writer (which also read: a downgrade) still holds it.
      return {0}
    end
    local longest = -1
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
      local n = tonumber(redis.call('hget', KEYS[1], field))
      if n then
        for i = n, 1, -1 do
          longest = math.max(longest, redis.call('pttl', ARGV[6] .. ':' .. field .. ':rwlock_timeout:' .. i))
        end
      end
    end
    if longest > 0 then
      redis.call('pexpire', KEYS[1], longest)
      return {0}
    end
  end
  redis.call('del', KEYS[1])
  return {1, redis.call(PUBLISH, ARGV[3], 0)}
end)
