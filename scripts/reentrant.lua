-- Shared prelude of the reentrant-lock scripts (prepended when embedded;
-- Redis Lua has no includes). Defines:
--
-- next_token(counter, ttl): the next fencing token of a lock name.
--   counter: redisson_lock_token:{name}; ttl: ms after seeding, 0 = never.
--   A missing counter is seeded from the server clock in microseconds, so
--   tokens keep increasing across a counter lost to a restart, a failover or
--   its own expiry (at most one acquisition per microsecond per name is
--   assumed, and a server clock that does not step backwards).
--
-- grant(lock, counter, owner, lease, seen, ttl): take or re-enter the lock.
--   lock: the lock HASH (field <owner> = hold count); lease: ms;
--   seen: the owner's hold count as the caller knew it, or nil on a first
--   attempt. A re-attempt after an unknown outcome passes seen; finding
--   seen + 1 means the earlier attempt took effect, so it is not counted
--   twice. Returns {1, holdCount, token} or {0, pttl of the holder}.
local function next_token(counter, ttl)
  local token = redis.call('incr', counter)
  if token == 1 then
    -- The counter was missing: continue from the server clock instead. Its
    -- TTL is set only here: re-seeding after it expires keeps tokens
    -- increasing, so a busy name need not refresh it on every acquisition.
    local now = redis.call('time')
    token = now[1] .. string.format('%06d', tonumber(now[2]))
    if tonumber(ttl) > 0 then
      redis.call('set', counter, token, 'px', ttl)
    else
      redis.call('set', counter, token)
    end
  end
  return tonumber(token)
end

local function grant(lock, counter, owner, lease, seen, ttl)
  if redis.call('exists', lock) == 0 then
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {1, 1, next_token(counter, ttl)}
  end
  local count = tonumber(redis.call('hget', lock, owner) or '0')
  if count == 0 then
    return {0, redis.call('pttl', lock)}
  end
  if not (seen and count == seen + 1) then
    count = redis.call('hincrby', lock, owner, 1)
  end
  -- Extend, never shorten: a re-entry with a short lease must not cut the
  -- lease an outer hold of the same owner relies on.
  if redis.call('pttl', lock) < lease then
    redis.call('pexpire', lock, lease)
  end
  return {1, count, next_token(counter, ttl)}
end
