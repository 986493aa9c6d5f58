-- Shared prelude of the fair-lock scripts (after reentrant.lua).
-- The queue LIST holds waiting owners in arrival order; the timeouts ZSET
-- holds each one's deadline in ms, as Redisson computes it on joining: the
-- deadline of the waiter ahead (or the holder's remaining lease) plus the
-- waiter's wait (its own wait time, or the fair wait timeout without one),
-- so that a waiter that vanished is dropped from the head once its deadline
-- passes. A waiter's slot is its deadline minus the deadline of what is
-- ahead of it (the waiter ahead, or the holder's expiry); when it leaves
-- the queue, those behind move up by its slot, so each keeps its own wait
-- after the one ahead of it, but none to before the deadline of the one
-- that left (had it stayed, they would have kept their places that long).
-- A live runtime's waiters keep their places by fair_refresh.lua, which
-- gives them all the same near deadline: the floor keeps a leaving one from
-- taking the others' places with it. "Now" is the Redis server's clock,
-- the same for every client.
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- prune drops waiters whose deadline passed from the head of the queue.
local function prune(queue, timeouts, now)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return
    end
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if deadline and deadline > now then
      return
    end
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, head)
  end
end

-- move_up moves every waiter from position from (1-based) on up by slot
-- ms, but none to before floor (the deadline of the one that left) unless
-- it was there already.
local function move_up(queue, timeouts, from, slot, floor)
  if slot == 0 then
    return
  end
  for _, owner in ipairs(redis.call('lrange', queue, from - 1, -1)) do
    local deadline = tonumber(redis.call('zscore', timeouts, owner))
    if deadline then
      local moved = math.max(deadline - slot, math.min(deadline, floor))
      if moved ~= deadline then
        redis.call('zadd', timeouts, moved, owner)
      end
    end
  end
end

-- take_head removes the head, which is acquiring the free lock, and moves
-- every waiter behind it up by its slot (its deadline minus now: the lock
-- is free), so the next one's place lasts its own wait from now.
local function take_head(queue, timeouts, now)
  local head = redis.call('lpop', queue)
  local deadline = tonumber(redis.call('zscore', timeouts, head))
  redis.call('zrem', timeouts, head)
  if deadline then
    move_up(queue, timeouts, 1, math.max(deadline - now, 0), deadline)
  end
end

-- turn_hint is how long owner, queued and not granted, may wait before
-- something changes for it without a message: the holder's lease running
-- out, or, with another waiter at the head, that waiter's deadline passing.
-- -1: the holder's lock has no expiry and owner is next.
local function turn_hint(lock, queue, timeouts, owner, now)
  local ttl = redis.call('pttl', lock)
  local head = redis.call('lindex', queue, 0)
  if head and head ~= owner then
    local due = math.max((tonumber(redis.call('zscore', timeouts, head)) or now) - now, 0)
    if ttl < 0 or due < ttl then
      ttl = due
    end
  end
  return math.max(ttl, -1)
end
