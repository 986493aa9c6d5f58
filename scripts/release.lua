-- Shared prelude of the scripts that release holds of an exclusive lock
-- (prepended when embedded). Defines:
--
-- release_holds(lock, field, holds, expect, token, current): release holds
--   of field (an owner, or its <owner>:write) in the lock HASH.
--   holds: 1, or the whole count when the owner goes away. expect: "" or
--   a count, token: "" or a token; with either, act only if the field's
--   count equals expect and current() returns token: a give-back, which
--   must not touch a newer hold, not even one of the same owner id held
--   through another runtime (WithOwner, a restart) or by a Redisson thread,
--   whose holds Redis counts under the same field. current reads what
--   tells the holds apart: the holds' mark (reentrant.lua's HOLD_MARK) of
--   an exclusive lock, the fencing counter of a write.
--   Returns -1 not the owner, -2 count or token differs (nothing done), 0
--   holds released and some left, 1 the last hold to release: the caller
--   frees the lock its own way (nothing is written yet).
local function release_holds(lock, field, holds, expect, token, current)
  local count = tonumber(redis.call('hget', lock, field) or '0')
  if count == 0 then
    return -1
  end
  expect = tonumber(expect)
  if expect and count ~= expect or token ~= '' and current() ~= token then
    return -2
  end
  if count > tonumber(holds) then
    redis.call('hincrby', lock, field, -tonumber(holds))
    return 0
  end
  return 1
end
