-- Release write holds of a read-write lock (after guard.lua and release.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3], KEYS[4] the guard's (guard.lua)
-- ARGV[1] owner's write field <owner>:write
-- ARGV[2] holds to release: 1, or the whole count when the owner goes away
-- ARGV[3] channel redisson_rwlock:{name}
-- ARGV[4] "" or a write count: act only if the owner's count equals it
-- ARGV[5] "" or a fencing token: act only if the counter still holds it
--         (release.lua)
-- ARGV[6..8] the guard's (guard.lua)
-- When the last write hold goes and the writer still reads (a downgrade),
-- the lock stays held in read mode and nobody is told. Returns {1, heard}
-- lock freed (all waiters told, "1"), {0} still held, {-1} not the writer,
-- {-2} count or token differs from ARGV[4], ARGV[5].
return guarded(function()
  if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return {-1}
  end
  local released = release_holds(KEYS[1], ARGV[1], ARGV[2], ARGV[4], ARGV[5], function()
    return redis.call('get', KEYS[2])
  end)
  if released ~= 1 then
    return {released}
  end
  redis.call('hdel', KEYS[1], ARGV[1])
  if redis.call('hlen', KEYS[1]) > 1 then
    redis.call('hset', KEYS[1], 'mode', 'read')
    return {0}
  end
  redis.call('del', KEYS[1])
  return {1, redis.call(PUBLISH, ARGV[3], 1)}
end)
