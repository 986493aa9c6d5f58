-- Release holds of a reentrant lock (after guard.lua, release.lua and
-- reentrant.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3], KEYS[4] the guard's (guard.lua)
-- ARGV[1] owner
-- ARGV[2] holds to release: 1, or the whole count when the owner goes away
-- ARGV[3] channel redisson_lock__channel:{name}
-- ARGV[4] "" or a hold count: act only if the owner's count equals it (gives
--         back holds nobody may use without touching a newer hold)
-- ARGV[5] "" or a mark: act only if the holds' mark (reentrant.lua's
--         HOLD_MARK) is still it: the holds are the same run (release.lua)
-- ARGV[6..8] the guard's (guard.lua)
-- Returns {1, n} released (key deleted, waiters told; n clients received the
-- unlock message), {0} still held by the owner, {-1} not the owner, {-2}
-- count or mark differs from ARGV[4], ARGV[5] (nothing done).
return guarded(function()
  local released = release_holds(KEYS[1], ARGV[1], ARGV[2], ARGV[4], ARGV[5], function()
    return redis.call('hget', KEYS[1], HOLD_MARK)
  end)
  if released ~= 1 then
    return {released}
  end
  redis.call('del', KEYS[1])
  return {1, redis.call(PUBLISH, ARGV[3], 0)}
end)
