-- Release holds of a reentrant lock.
-- KEYS[1] lock HASH <name>
-- KEYS[2] unlock latch redisson_unlock_latch:{name}:<requestId>
-- KEYS[3] fencing counter redisson_lock_token:{name}
-- ARGV[1] owner
-- ARGV[2] holds to release: 1, or the whole count when the owner goes away
-- ARGV[3] channel redisson_lock__channel:{name}
-- ARGV[4] latch TTL ms
-- ARGV[5] "" or a hold count: act only if the owner's count equals it (undoes
--         an acquire whose outcome was unknown without touching a newer hold)
-- ARGV[6] "1" when no earlier attempt with this request id can have run, so
--         there is no earlier outcome to look up
-- ARGV[7] "" or the owner's count before this release, given only when an
--         earlier attempt of it may have run (see below)
-- ARGV[8] "" or the fencing counter as the owner's newest grant left it
-- Returns {1, n} released (key deleted, waiters told; n clients received the
-- unlock message), {0} still held by the owner, {-1} not the owner, {-2}
-- count differs from ARGV[5] (nothing done).
--
-- Why a retry cannot release twice. A release that leaves the owner holds
-- writes the latch, storing 0 as Redisson does, and a retry returns what it
-- finds there. A release of the owner's last holds, the usual unlock, writes
-- none (a key created and expired per unlock: 30% of this script's
-- Redis time, measured): its retry tells by the hash instead. The owner
-- holding nothing means an earlier attempt released it (or the lock was lost
-- before it ran: the two look alike, and either way nothing is left to
-- release); the owner holding again under a newer fencing token means it
-- re-entered after that release; otherwise no attempt ran. Only our own
-- retries read our latch keys (Redisson reads its own), so writing fewer of
-- them changes nothing a Redisson client sees.
if ARGV[6] ~= '1' then
  local prior = redis.call('get', KEYS[2])
  if prior then
    return {tonumber(prior), 0}
  end
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[7]) == tonumber(ARGV[2]) then
  if count == 0 then
    return {1, 0}
  end
  local counter = ARGV[8] ~= '' and redis.call('get', KEYS[3])
  if counter and counter ~= ARGV[8] then
    return {0}
  end
end
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
return {1, redis.call(PUBLISH, ARGV[3], 0)}
