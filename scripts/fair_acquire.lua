-- Acquire or re-enter a fair lock, or join its queue (after reentrant.lua
-- and fair.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2] queue redisson_lock_queue:{name}
-- KEYS[3] timeouts redisson_lock_timeout:{name}
-- KEYS[4] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease ms
-- ARGV[2] owner
-- ARGV[3] wait ms: the waiter's own wait time, or the fair wait timeout
--         (how long its place lasts after the one ahead of it)
-- ARGV[4] owner's hold count as last known, "" on a first attempt
-- ARGV[5] fencing counter TTL ms, 0 = never expire
-- ARGV[6] "1" to join the queue when the lock cannot be had, "0" not to
-- ARGV[7] fencing token of the owner's newest grant as last known, "" if none
--         (see grant)
-- Returns {1, holdCount, token} when held, else {0, ttl}: how long before
-- something changes for the owner without a message (see turn_hint), or {-3}
-- when a read-write lock holds the name.
local now = now_ms()
prune(KEYS[2], KEYS[3], now)
local owner, lease, wait = ARGV[2], tonumber(ARGV[1]), tonumber(ARGV[3])
if redis.call('hexists', KEYS[1], owner) == 1 then
  return grant(KEYS[1], KEYS[4], owner, lease, tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[7]))
end
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if not head or head == owner then
    if head then
      take_head(KEYS[2], KEYS[3], now)
    end
    return grant(KEYS[1], KEYS[4], owner, lease, nil, ARGV[5])
  end
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-3} -- a read-write lock holds the name: one kind per name
end
if ARGV[6] == '1' and not redis.call('zscore', KEYS[3], owner) then
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
return {0, turn_hint(KEYS[1], KEYS[2], KEYS[3], owner, now)}
