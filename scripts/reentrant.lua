-- Shared prelude of the reentrant-lock scripts (prepended when embedded;
-- Redis Lua has no includes). Defines:
--
-- next_token(counter, ttl): the next fencing token of a lock name.
--   counter: redisson_lock_token:{name}, holding the last token issued;
--   ttl: ms the counter lives after this acquisition, 0 = none set.
--   token = max(counter + 1, server clock in microseconds), stored back.
--   Why it never goes back, whatever the counter's state (missing, expired,
--   rolled back by a restart from an older RDB/AOF or by a failover to a
--   lagging replica, re-created at 1 by Redisson's RFencedLock): a token we
--   issue is the clock reading of its acquisition, or counter + 1 when the
--   counter is ahead of the clock, and it can be ahead only by the
--   acquisitions that came faster than one per microsecond. A stale counter
--   is then beaten by the clock, which has moved on since any token it lost.
--   Assumes: fewer than one acquisition per microsecond per name on average
--   (one Redis runs one script at a time, each taking microseconds;
--   RFencedLock's INCRs on top of ours count here too), and a server clock
--   that never steps back (after a failover: the new master's clock is not
--   behind the old one's; NTP slewing is fine, a stepped clock is not).
--
-- grant(lock, counter, owner, lease, ttl): take or re-enter the lock.
--   lock: the lock HASH (field <owner> = hold count); lease: ms. Each
--   request runs it once, however many of its attempts arrive (guard.lua).
--   Returns {1, holdCount, token, fresh, mark}, {0, pttl of the holder}, or
--   {-3} when the hash is a read-write lock's (it has a mode field: one kind
--   per name). fresh is 1 when the lock did not exist: the owner's holds, if
--   it had any, were gone (deleted or expired) before this grant.
--   mark is the holds' mark (HOLD_MARK).
-- HOLD_MARK: the lock HASH's field that tells one run of holds from the
--   next: the token of the grant that began the owner's holds, written by
--   our grants alone and gone with the hash. Only our scripts write it, so
--   a give-back, which must release our holds and nothing else, checks it
--   (release.lua): a fresh hold of the same owner id taken once ours were
--   gone (through another runtime, or by a Redisson thread, whose RLock
--   neither writes the mark nor moves the fencing counter) has another
--   mark or none. A re-entry keeps the mark; one of a hold that has none
--   (a Redisson thread's, re-entered through a borrowed id) writes its own
--   token there, so that its give-back can tell it. Redisson's scripts
--   pass over a field that is not their owner's.
-- follow(counter, lock): make an expiring fencing counter live at least as
--   long as the lock: a give-back tells by the counter whether a newer
--   grant came since the one it undoes (release.lua), so the counter must
--   outlive every hold. Never shortens; a permanent or missing counter is
--   left alone. Every script that lengthens a lock's life calls it after.
-- counter_of(lock): the counter's key of a lock key (scripts.TokenKey), for
--   the renewals, whose calls carry only lock keys; same hash slot.
local function follow(counter, lock)
  local left = redis.call('pttl', counter)
  if left >= 0 then
    local need = redis.call('pttl', lock)
    if need > left then
      redis.call('pexpire', counter, need)
    end
  end
end

local function counter_of(lock)
  if string.find(lock, '{', 1, true) then
    return 'redisson_lock_token:' .. lock
  end
  return 'redisson_lock_token:{' .. lock .. '}'
end

local function next_token(counter, ttl)
  local now = redis.call('time')
  local clock = now[1] .. string.format('%06d', tonumber(now[2]))
  -- The clock's digits as they came: a 16-digit Lua number could be
  -- formatted in exponent form on its way to Redis. SET ... GET stores the
  -- clock and reads the last token in one command (Redis 6.2+), the TTL
  -- riding along: the usual case, where the clock is ahead, costs one
  -- command where GET, SET and PEXPIRE cost three.
  local prior
  if tonumber(ttl) > 0 then
    prior = redis.call('set', counter, clock, 'px', ttl, 'get')
  else
    prior = redis.call('set', counter, clock, 'get')
  end
  -- tonumber: nil for a missing counter, or one that is not a number
  -- (replaced rather than failing every acquisition of the name).
  local last = tonumber(prior)
  if last and last >= tonumber(clock) then
    -- Ahead of the clock (a burst within one microsecond, or RFencedLock's
    -- INCRs on top of ours): put the last token back as it was written
    -- and count on from it. INCR keeps integer precision.
    if tonumber(ttl) > 0 then
      redis.call('set', counter, prior, 'px', ttl)
    else
      redis.call('set', counter, prior)
    end
    return redis.call('incr', counter)
  end
  return tonumber(clock)
end

local HOLD_MARK = 'actorlock_hold'

local function grant(lock, counter, owner, lease, ttl)
  if redis.call('exists', lock) == 0 then
    local token = next_token(counter, ttl)
    -- '%.0f': a 16-digit Lua number would go to Redis in exponent form.
    redis.call('hset', lock, owner, 1, HOLD_MARK, string.format('%.0f', token))
    redis.call('pexpire', lock, lease)
    return {1, 1, token, 1, token}
  end
  -- The owner's count, the read-write lock's mode field and the holds'
  -- mark in one command. A key of another type fails here, before anything
  -- is written.
  local fields = redis.call('hmget', lock, owner, 'mode', HOLD_MARK)
  if fields[2] then
    return {-3}
  end
  if not fields[1] then
    return {0, redis.call('pttl', lock)}
  end
  local count = redis.call('hincrby', lock, owner, 1)
  -- Extend, never shorten: a re-entry with a short lease must not cut the
  -- lease an outer hold of the same owner relies on.
  if redis.call('pttl', lock) < lease then
    redis.call('pexpire', lock, lease)
  end
  local token = next_token(counter, ttl)
  follow(counter, lock)
  local mark = tonumber(fields[3])
  if not mark then
    mark = token
    redis.call('hset', lock, HOLD_MARK, string.format('%.0f', token))
  end
  return {1, count, token, 0, mark}
end
