-- Take or re-enter the write hold of a read-write lock (after
-- reentrant.lua). A reader cannot upgrade: a held read (even its own) makes
-- the lock unavailable to a writer.
-- KEYS[1] lock HASH <name>
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease ms
-- ARGV[2] owner's write field <owner>:write
-- ARGV[3] owner's write count as last known, "" on a first attempt
-- ARGV[4] fencing counter TTL ms, 0 = never expire
-- ARGV[5] fencing token of the owner's newest grant as last known, "" if none
--         (see grant in reentrant.lua: only the owner's grants move the
--         counter while it writes)
-- Returns {1, writeCount, token}, {0, pttl of the lock}, or {-3} when the
-- hash has no mode: a reentrant or fair lock holds the name.
local lease = tonumber(ARGV[1])
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  if redis.call('exists', KEYS[1]) == 1 then
    return {-3}
  end
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], lease)
  return {1, 1, next_token(KEYS[2], ARGV[4])}
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if mode ~= 'write' or count == 0 then
  return {0, redis.call('pttl', KEYS[1])}
end
local ttl = redis.call('pttl', KEYS[1])
local token = took_effect(KEYS[2], tonumber(ARGV[5]), tonumber(ARGV[3]), count)
if not token then
  count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  -- As Redisson's write re-entry: the new lease adds to what is left, so
  -- the lock outlives every hold's lease (local validity counts from the
  -- send, so it never ends after this expiry).
  redis.call('pexpire', KEYS[1], math.max(ttl, 0) + lease)
elseif ttl < lease then
  -- A re-attempt of a re-entry that took effect: it added already.
  redis.call('pexpire', KEYS[1], lease)
end
if token == true or not token then
  token = next_token(KEYS[2], ARGV[4])
end
return {1, count, token}
