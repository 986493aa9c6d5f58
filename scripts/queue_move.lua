-- Move due items of a delayed queue into its destination list.
-- KEYS[1] destination LIST <name>
-- KEYS[2] redisson_delay_queue_timeout:{name}  ZSET member -> due ms
-- KEYS[3] redisson_delay_queue:{name}          LIST of members
-- ARGV[1] most items to move in this call
-- Returns {moved, ms until the next item is due (-1: none left), server now ms,
-- {ms each moved item was moved after its due time}}.
--
-- Atomic, so movers of several processes racing on one queue move each item
-- exactly once. The batch bound keeps one call from holding the server's
-- event loop for long; the caller repeats while a full batch was moved.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])

-- The due items, earliest due first (as Redisson's transfer takes them:
-- by its timeout ZSET), then out of the insertion-order list. When they are
-- the list's head, as usual (items are offered roughly in due order, and a
-- backlog is all due), one LTRIM removes them, which keeps a move O(batch)
-- instead of one list scan (LREM) per item.
local members = {}
local late = {}
local due = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'withscores', 'limit', 0, limit)
local pending = {}
for i = 1, #due, 2 do
  members[#members + 1] = due[i]
  late[#late + 1] = now - tonumber(due[i + 1])
  pending[due[i]] = true
end
if #members > 0 then
  -- One kind per name (kind.lua), checked only when there is something to
  -- move: a mover with nothing due stays quiet whatever the name holds.
  local bad = wrong_kind(KEYS[1], 'list') if bad then return bad end
  local head = redis.call('lrange', KEYS[3], 0, #members - 1)
  local atHead = #head == #members
  for _, member in ipairs(head) do
    if not pending[member] then
      atHead = false
      break
    end
  end
  if atHead then
    redis.call('ltrim', KEYS[3], #members, -1)
  else
    for _, member in ipairs(members) do
      redis.call('lrem', KEYS[3], 1, member)
    end
  end
  redis.call('zrem', KEYS[2], unpack(members))
end

if #members > 0 then
  local values = {}
  for i, member in ipairs(members) do
    -- A member this layout cannot decode (written by something else) is
    -- delivered as it is rather than left to block the queue forever.
    local ok, _, value = pcall(struct.unpack, 'Bc0Lc0', member)
    if ok and type(value) == 'string' then
      values[i] = value
    else
      values[i] = member
    end
  end
  redis.call('rpush', KEYS[1], unpack(values))
end

local next = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
local wait = -1
if next[1] then
  wait = math.max(tonumber(next[2]) - now, 0)
end
return {#members, wait, now, late}
