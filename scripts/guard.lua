-- Shared prelude of every script that changes a lock (prepended when
-- embedded): the request's duplicate guard. One request (an acquisition,
-- an unlock, a give-back, ...) may reach Redis more than once: its reply
-- was lost and it was sent again, and the first attempt may arrive after
-- the second (held back on a connection while the retry went out on
-- another). Every attempt, the first as much as any retry, runs through
-- guarded(), so the request acts once:
--   - the guard key, actorlock_request:{name}:<request id>, holds the reply
--     of the attempt that acted; any other attempt returns that reply and
--     does nothing;
--   - an attempt arriving after its call's deadline (ARGV not_after, in the
--     server's clock) does nothing: the caller has stopped waiting for it;
--   - settling a request (ARGV settle = "1") tells its caller what it did:
--     the recorded reply, or, when no attempt acted, {-8}, after marking the
--     guard so that none acts later; a settle that arrives after its own
--     deadline (before which the guard is sure to live) answers {-9}
--     instead. The guard lives (ARGV ttl) longer than any attempt of the
--     request can act, so a mark or a reply is never forgotten while an
--     attempt could still arrive.
-- KEYS[#KEYS]     the guard
-- KEYS[#KEYS - 1] the guard of an earlier request that the caller knows no
--                 attempt of can still arrive (to delete), or the guard
-- ARGV[#ARGV - 2] guard ttl ms
-- ARGV[#ARGV - 1] not after: server clock in microseconds, or ""
-- ARGV[#ARGV]     "1" to settle, "" to act
-- Every reply ends with the server's clock in microseconds, for the
-- caller's estimate of it. A body's reply starts with a status that is
-- never NOT_RUN or LATE (a count that may be any integer goes after it):
-- the caller tells the guard's answers from the body's by that element.
local NOT_RUN, LATE = -8, -9

local function guard_encode(reply)
  local parts = {}
  for i, v in ipairs(reply) do
    parts[i] = string.format('%.0f', v)
  end
  return table.concat(parts, ',')
end

local function guard_decode(s)
  if s == 'x' then
    return {NOT_RUN}
  end
  local reply = {}
  for v in string.gmatch(s, '[^,]+') do
    reply[#reply + 1] = tonumber(v)
  end
  return reply
end

local function guarded(body)
  local guard, spent = KEYS[#KEYS], KEYS[#KEYS - 1]
  local ttl, not_after = ARGV[#ARGV - 2], tonumber(ARGV[#ARGV - 1])
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if spent ~= guard then
    redis.call('del', spent)
  end
  local reply
  local prior = redis.call('get', guard)
  if prior then
    reply = guard_decode(prior)
  elseif not_after and now > not_after then
    -- Too late to act, or, settling, to mark: the guard may have expired
    -- meanwhile, and an attempt that acted would pass for none.
    reply = {LATE}
  elseif ARGV[#ARGV] == '1' then
    redis.call('set', guard, 'x', 'px', ttl)
    reply = {NOT_RUN}
  else
    reply = body()
    if reply.err then
      return reply -- refused before anything was written: nothing to record
    end
    redis.call('set', guard, guard_encode(reply), 'px', ttl)
  end
  reply[#reply + 1] = now
  return reply
end
