-- Release an owner's last hold and grant the lock to the next local waiter in
-- the same step (after the guard.lua and reentrant.lua preludes). The lock
-- is never free in between, so no other process is woken for a lock it
-- could not get.
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3], KEYS[4] the guard's (guard.lua)
-- ARGV[1] releasing owner
-- ARGV[2] next owner
-- ARGV[3] next owner's lease ms
-- ARGV[4] fencing counter TTL ms, 0 = never expire
-- ARGV[5..7] the guard's (guard.lua)
-- Returns {-1} releasing owner did not hold it (nothing done),
-- {0} releasing owner still holds it (its count was higher than known),
-- {1, 1, holdCount, token, fresh, mark} released and granted,
-- {1, 0, pttl} released, but another owner holds it now.
return guarded(function()
  local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
  if count == 0 then
    return {-1}
  end
  if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
    return {0}
  end
  redis.call('del', KEYS[1])
  local g = grant(KEYS[1], KEYS[2], ARGV[2], tonumber(ARGV[3]), ARGV[4])
  if g[1] == 1 then
    return {1, 1, g[2], g[3], g[4], g[5]}
  end
  return {1, 0, g[2]}
end)
