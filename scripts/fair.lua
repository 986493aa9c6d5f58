-- Shared prelude of the fair-lock scripts (after reentrant.lua).
-- The queue LIST holds waiting owners in arrival order; the timeouts ZSET
-- holds each one's deadline in ms: the deadline of the waiter ahead (or the
-- holder's remaining lease) plus the wait validity, so that a waiter that
-- vanished is dropped from the head once its deadline passes. "Now" is the
-- Redis server's clock, the same for every client.
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

-- take_head removes the head, which is acquiring, and moves every waiter
-- behind it one slot up: each deadline was its predecessor's plus wait.
local function take_head(queue, timeouts, wait)
  local head = redis.call('lpop', queue)
  redis.call('zrem', timeouts, head)
  for _, owner in ipairs(redis.call('lrange', queue, 0, -1)) do
    redis.call('zincrby', timeouts, -wait, owner)
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
