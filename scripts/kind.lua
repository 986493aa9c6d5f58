-- Shared prelude of the semaphore, latch and queue scripts (prepended when
-- embedded): one kind per name.
-- wrong_kind(key, want): nil when key is free or of the Redis type want
--   ('string': a semaphore's or a latch's count; 'list': a queue);
--   otherwise the error reply 'WRONGKIND <what key holds>', which the script
--   returns before it writes anything. What key holds is 'lock' (a reentrant
--   or fair lock's HASH), 'read-write-lock', or its Redis type.
local function wrong_kind(key, want)
  local t = redis.call('type', key)['ok']
  if t == 'none' or t == want then
    return nil
  end
  if t == 'hash' then
    t = 'lock'
    if redis.call('hexists', key, 'mode') == 1 then
      t = 'read-write-lock'
    end
  end
  return redis.error_reply('WRONGKIND ' .. t)
end
