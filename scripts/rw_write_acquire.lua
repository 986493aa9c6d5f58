-- Take or re-enter the write hold of a read-write lock (after guard.lua and
-- reentrant.lua). A reader cannot upgrade: a held read (even its own) makes
-- the lock unavailable to a writer.
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3], KEYS[4] the guard's (guard.lua)
-- ARGV[1] lease ms
-- ARGV[2] owner's write field <owner>:write
-- ARGV[3] fencing counter TTL ms, 0 = never expire
-- ARGV[4..6] the guard's (guard.lua)
-- Returns {1, writeCount, token, fresh, token} (fresh: the lock did not
-- exist; a write's give-back checks the fencing counter: its mark is its
-- token),
-- {0, pttl of the lock}, or {-3} when the
-- hash has no mode: a reentrant or fair lock holds the name.
return guarded(function()
  local lease = tonumber(ARGV[1])
  local mode = redis.call('hget', KEYS[1], 'mode')
  if not mode then
    if redis.call('exists', KEYS[1]) == 1 then
      return {-3}
    end
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], lease)
    local token = next_token(KEYS[2], ARGV[3])
    return {1, 1, token, 1, token}
  end
  local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
  if mode ~= 'write' or count == 0 then
    return {0, redis.call('pttl', KEYS[1])}
  end
  local ttl = redis.call('pttl', KEYS[1])
  count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  -- As Redisson's write re-entry: the new lease adds to what is left, so
  -- the lock outlives every hold's lease (local validity counts from the
  -- send, so it never ends after this expiry).
  redis.call('pexpire', KEYS[1], math.max(ttl, 0) + lease)
  local token = next_token(KEYS[2], ARGV[3])
  follow(KEYS[2], KEYS[1])
  return {1, count, token, 0, token}
end)
