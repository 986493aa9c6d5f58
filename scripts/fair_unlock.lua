-- Release holds of a fair lock; when the lock becomes free, hand it to the
-- queue's head if that is the given local waiter, else tell the head on its
-- own channel (after guard.lua, release.lua, reentrant.lua and fair.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2] queue redisson_lock_queue:{name}
-- KEYS[3] timeouts redisson_lock_timeout:{name}
-- KEYS[4] fencing counter redisson_lock_token:{name}
-- KEYS[5], KEYS[6] the guard's (guard.lua)
-- ARGV[1] owner
-- ARGV[2] holds to release: 1, or the whole count when the owner goes away
-- ARGV[3] channel prefix redisson_lock__channel:{name} (the head's channel
--         is <prefix>:<owner>)
-- ARGV[4] "" or a hold count: act only if the owner's count equals it
-- ARGV[5] a local waiter the lock may go to directly if it is the head, or ""
-- ARGV[6] that waiter's lease ms
-- ARGV[7] fencing counter TTL ms, 0 = never expire
-- ARGV[8] "" or a wait ms: the release gives back a grant its waiter could
--         not use (it came back too late), and the owner keeps the place at
--         the head of the queue that the grant took, for that long
-- ARGV[9] "" or a mark: act only if the holds' mark (reentrant.lua's
--         HOLD_MARK) is still it (release.lua)
-- ARGV[10..12] the guard's (guard.lua)
-- Returns {1, heard} released (heard: clients that received the message),
-- {1, 0, holdCount, token, fresh, mark} released and granted to ARGV[5], {0} still held,
-- {-1} not the owner, {-2} count or mark differs from ARGV[4], ARGV[9]
-- (nothing done).
return guarded(function()
  local now = now_ms()
  prune(KEYS[2], KEYS[3], now)
  local released = release_holds(KEYS[1], ARGV[1], ARGV[2], ARGV[4], ARGV[9], function()
    return redis.call('hget', KEYS[1], HOLD_MARK)
  end)
  if released ~= 1 then
    return {released}
  end
  redis.call('del', KEYS[1])
  local keep = tonumber(ARGV[8])
  if keep and not redis.call('zscore', KEYS[3], ARGV[1]) then
    redis.call('zadd', KEYS[3], now + keep, ARGV[1])
    redis.call('lpush', KEYS[2], ARGV[1])
    return {1, 0}
  end
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then
    return {1, 0}
  end
  if head == ARGV[5] then
    take_head(KEYS[2], KEYS[3], now)
    local g = grant(KEYS[1], KEYS[4], head, tonumber(ARGV[6]), ARGV[7])
    return {1, 0, g[2], g[3], g[4], g[5]}
  end
  return {1, redis.call(PUBLISH, ARGV[3] .. ':' .. head, 0)}
end)
