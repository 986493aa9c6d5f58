-- Keep the places of a runtime's live waiters of one fair lock (after
-- fair.lua): each gets the deadline now + window, refreshed well before it
-- passes, so that a waiter whose runtime died is dropped from the head
-- about a window after its last refresh, rather than its whole wait (each
-- dead waiter ahead of a live one would add its own). Those behind a
-- refreshed waiter that are not live here move with it, keeping their
-- slots (see fair.lua): a Redisson waiter's place still lasts its own wait
-- after the one ahead.
-- KEYS[1] queue redisson_lock_queue:{name}
-- KEYS[2] timeouts redisson_lock_timeout:{name}
-- ARGV[1] window ms
-- ARGV[2..] the live waiters
-- Returns how many of them have no place (dropped: they join again).
local target = now_ms() + tonumber(ARGV[1])
local live = {}
for i = 2, #ARGV do
  live[ARGV[i]] = true
end
local found, shift = 0, 0
for _, owner in ipairs(redis.call('lrange', KEYS[1], 0, -1)) do
  local deadline = tonumber(redis.call('zscore', KEYS[2], owner))
  if deadline then
    local moved = deadline + shift
    if live[owner] then
      live[owner] = nil
      found = found + 1
      moved = target
      shift = target - deadline
    end
    if moved ~= deadline then
      redis.call('zadd', KEYS[2], moved, owner)
    end
  end
end
return #ARGV - 1 - found
