-- Release holds of a fair lock; when the lock becomes free, hand it to the
-- queue's head if that is the given local waiter, else tell the head on its
-- own channel (after reentrant.lua and fair.lua).
-- KEYS[1] lock HASH <name>
-- KEYS[2] queue redisson_lock_queue:{name}
-- KEYS[3] timeouts redisson_lock_timeout:{name}
-- KEYS[4] unlock latch redisson_unlock_latch:{name}:<requestId>
-- KEYS[5] fencing counter redisson_lock_token:{name}
-- ARGV[1] owner
-- ARGV[2] holds to release: 1, or the whole count when the owner goes away
-- ARGV[3] channel prefix redisson_lock__channel:{name} (the head's channel
--         is <prefix>:<owner>)
-- ARGV[4] latch TTL ms
-- ARGV[5] "" or a hold count: act only if the owner's count equals it
-- ARGV[6] unused (a head that takes the lock moves those behind up by its
--         own slot: see fair.lua)
-- ARGV[7] a local waiter the lock may go to directly if it is the head, or ""
-- ARGV[8] that waiter's lease ms
-- ARGV[9] fencing counter TTL ms, 0 = never expire
-- ARGV[10] "1" when no earlier attempt with this request id can have run
--         (a first attempt): the latch is not read, only written
-- Returns {1, heard} released (heard: clients that received the message),
-- {1, 0, holdCount, token} released and granted to ARGV[7], {0} still held,
-- {-1} not the owner, {-2} count differs from ARGV[5] (nothing done).
if ARGV[10] ~= '1' then
  local prior = redis.call('get', KEYS[4])
  if prior then
    -- A retry: report what the first attempt did, including a hand-off.
    if prior == '1' and ARGV[7] ~= '' then
      local count = tonumber(redis.call('hget', KEYS[1], ARGV[7]) or '0')
      if count > 0 then
        return {1, 0, count, tonumber(redis.call('get', KEYS[5]))}
      end
    end
    return {tonumber(prior), 0}
  end
end
local now = now_ms()
prune(KEYS[2], KEYS[3], now)
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if count == 0 then
  return {-1}
end
local expect = tonumber(ARGV[5])
if expect and count ~= expect then
  return {-2}
end
if count > tonumber(ARGV[2]) then
  redis.call('hincrby', KEYS[1], ARGV[1], -tonumber(ARGV[2]))
  redis.call('set', KEYS[4], 0, 'px', ARGV[4])
  return {0}
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[4], 1, 'px', ARGV[4])
local head = redis.call('lindex', KEYS[2], 0)
if not head then
  return {1, 0}
end
if head == ARGV[7] then
  take_head(KEYS[2], KEYS[3], now)
  local g = grant(KEYS[1], KEYS[5], head, tonumber(ARGV[8]), nil, ARGV[9])
  return {1, 0, g[2], g[3]}
end
return {1, redis.call(PUBLISH, ARGV[3] .. ':' .. head, 0)}
