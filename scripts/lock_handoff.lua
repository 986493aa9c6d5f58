-- Release an owner's last hold and grant the lock to the next local waiter in
-- the same step (after the reentrant.lua prelude). The lock is never free in
-- between, so no other process is woken for a lock it could not get.
-- KEYS[1] lock HASH <name>
-- KEYS[2] unlock latch redisson_unlock_latch:{name}:<requestId> of the release
-- KEYS[3] fencing counter redisson_lock_token:{name}
-- ARGV[1] releasing owner
-- ARGV[2] latch TTL ms
-- ARGV[3] next owner
-- ARGV[4] next owner's lease ms
-- ARGV[5] next owner's hold count as last known, "" on a first attempt
-- ARGV[6] fencing counter TTL ms, 0 = never expire
-- ARGV[7] "1" when no earlier attempt of this release can have run: the
--         latch is then not read (see lock_unlock.lua), only written
-- Returns {-1} releasing owner did not hold it (nothing done),
-- {0} releasing owner still holds it (its count was higher than known),
-- {1, 1, holdCount, token} released and granted,
-- {1, 0, pttl} released, but another owner holds it now (only on a retry).
local state = false
if ARGV[7] ~= '1' then
  state = redis.call('get', KEYS[2])
end
if state then
  state = tonumber(state)
else
  local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
  if count == 0 then
    return {-1}
  end
  state = 0
  if count == 1 then
    redis.call('del', KEYS[1])
    state = 1
  else
    redis.call('hincrby', KEYS[1], ARGV[1], -1)
  end
  redis.call('set', KEYS[2], state, 'px', ARGV[2])
end
if state == 0 then
  return {0}
end
local g = grant(KEYS[1], KEYS[3], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6])
if g[1] == 1 then
  return {1, 1, g[2], g[3]}
end
return {1, 0, g[2]}
