-- Acquire or re-enter a fair lock, or join its queue (after guard.lua,
-- reentrant.lua and fair.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2] queue redisson_lock_queue:{name}
-- KEYS[3] timeouts redisson_lock_timeout:{name}
-- KEYS[4] fencing counter redisson_lock_token:{name}
-- KEYS[5], KEYS[6] the guard's (guard.lua)
-- ARGV[1] lease ms
-- ARGV[2] owner
-- ARGV[3] wait ms: how long its place lasts after the one ahead of it when
--         it joins (see fair.lua)
-- ARGV[4] fencing counter TTL ms, 0 = never expire
-- ARGV[5] "1" to join the queue when the lock cannot be had, "0" not to
-- ARGV[6..8] the guard's (guard.lua)
-- Returns {1, holdCount, token, fresh, mark} when held (see grant), else {0, ttl, head, joined}:
-- ttl is how long before something changes for the owner without a
-- message (see turn_hint), head 1 when the owner is the queue's head (the
-- next to get the lock), joined 1 when this attempt put it at the back of
-- the queue; or {-3} when a read-write lock holds the name.
return guarded(function()
  local now = now_ms()
  prune(KEYS[2], KEYS[3], now)
  local owner, lease, wait = ARGV[2], tonumber(ARGV[1]), tonumber(ARGV[3])
  if redis.call('hexists', KEYS[1], owner) == 1 then
    return grant(KEYS[1], KEYS[4], owner, lease, ARGV[4])
  end
  if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if not head or head == owner then
      if head then
        take_head(KEYS[2], KEYS[3], now)
      end
      return grant(KEYS[1], KEYS[4], owner, lease, ARGV[4])
    end
  end
  if redis.call('hexists', KEYS[1], 'mode') == 1 then
    return {-3} -- a read-write lock holds the name: one kind per name
  end
  local joined = 0
  if ARGV[5] == '1' and not redis.call('zscore', KEYS[3], owner) then
    joined = 1
    -- Join the back: its deadline is the one of the waiter ahead (or the
    -- holder's remaining lease) plus the wait validity.
    local last = redis.call('lindex', KEYS[2], -1)
    local ahead
    if last then
      ahead = (tonumber(redis.call('zscore', KEYS[3], last)) or now) - now
    else
      ahead = redis.call('pttl', KEYS[1])
    end
    redis.call('zadd', KEYS[3], math.max(ahead, 0) + wait + now, owner)
    redis.call('rpush', KEYS[2], owner)
  end
  local head = 0
  if redis.call('lindex', KEYS[2], 0) == owner then
    head = 1
  end
  return {0, turn_hint(KEYS[1], KEYS[2], KEYS[3], owner, now), head, joined}
end)
