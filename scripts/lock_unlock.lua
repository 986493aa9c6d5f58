-- Release holds of a reentrant lock (after the guard.lua prelude).
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3], KEYS[4] the guard's (guard.lua)
-- ARGV[1] owner
-- ARGV[2] holds to release: 1, or the whole count when the owner goes away
-- ARGV[3] channel redisson_lock__channel:{name}
-- ARGV[4] "" or a hold count: act only if the owner's count equals it (gives
--         back holds nobody may use without touching a newer hold)
-- ARGV[5] "" or a fencing token: act only if the counter still holds it, no
--         grant having come since (an owner id held through several
--         runtimes counts their holds together: only the counter tells whose
--         is newest)
-- ARGV[6..8] the guard's (guard.lua)
-- Returns {1, n} released (key deleted, waiters told; n clients received the
-- unlock message), {0} still held by the owner, {-1} not the owner, {-2}
-- count or token differs from ARGV[4], ARGV[5] (nothing done).
return guarded(function()
  local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
  if count == 0 then
    return {-1}
  end
  local expect = tonumber(ARGV[4])
  if expect and count ~= expect or ARGV[5] ~= '' and redis.call('get', KEYS[2]) ~= ARGV[5] then
    return {-2}
  end
  if count > tonumber(ARGV[2]) then
    redis.call('hincrby', KEYS[1], ARGV[1], -tonumber(ARGV[2]))
    return {0}
  end
  redis.call('del', KEYS[1])
  return {1, redis.call(PUBLISH, ARGV[3], 0)}
end)
