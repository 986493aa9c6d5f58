-- Release holds of a reentrant lock.
-- KEYS[1] lock HASH <name>
-- KEYS[2] unlock latch redisson_unlock_latch:{name}:<requestId>
-- ARGV[1] owner
-- ARGV[2] holds to release: 1, or the whole count when the owner goes away
-- ARGV[3] channel redisson_lock__channel:{name}
-- ARGV[4] latch TTL ms
-- ARGV[5] "" or a hold count: act only if the owner's count equals it (undoes
--         an acquire whose outcome was unknown without touching a newer hold)
-- ARGV[6] "1" when no earlier attempt with this request id can have run, so
--         there is no earlier outcome to look up (the latch is still written:
--         a later retry of this request must find it)
-- Returns {1, n} released (key deleted, waiters told; n clients received the
-- unlock message), {0} still held by the owner, {-1} not the owner, {-2}
-- count differs from ARGV[5] (nothing done). The latch makes a retried
-- request return its first result instead of releasing twice; it stores 0/1
-- exactly as Redisson does. Nothing but our own retries of our own request
-- ids reads our latch keys (Redisson reads only its own), so skipping the
-- read on a first attempt changes nothing it sees.
if ARGV[6] ~= '1' then
  local prior = redis.call('get', KEYS[2])
  if prior then
    return {tonumber(prior), 0}
  end
end
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
  redis.call('set', KEYS[2], 0, 'px', ARGV[4])
  return {0}
end
redis.call('del', KEYS[1])
local heard = redis.call(PUBLISH, ARGV[3], 0)
redis.call('set', KEYS[2], 1, 'px', ARGV[4])
return {1, heard}
