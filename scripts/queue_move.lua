-- Move due items of a delayed queue into its destination list.
-- KEYS[1] destination LIST <name>
-- KEYS[2] redisson_delay_queue_timeout:{name}  ZSET member -> due ms
-- KEYS[3] redisson_delay_queue:{name}          LIST of members, insertion order
-- ARGV[1] most items to move in this call
-- Returns {moved, ms until the next item is due (-1: none left), server now ms,
-- {ms each moved item was moved after its due time}}.
--
-- Atomic, so movers of several processes racing on one queue move each item
-- exactly once. The batch bound keeps one call from holding the server's
-- event loop for long; the caller repeats while a full batch was moved.
--
-- Order: earliest due first (as Redisson's transfer takes them: by its
-- timeout ZSET), and items due at the same ms in the order they were offered,
-- which the insertion-order list keeps (the ZSET alone would order them by
-- their members' random ids).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])

-- first_offered returns the first n members of the list whose due time is
-- score, in list order (a tie larger than a batch), and their places.
local function first_offered(list, zset, score, n)
  local tied = {}
  for _, member in ipairs(redis.call('zrangebyscore', zset, score, score)) do
    tied[member] = true
  end
  local out, at = {}, {}
  local from, chunk = 0, 4 * n
  while #out < n do
    local part = redis.call('lrange', list, from, from + chunk - 1)
    if #part == 0 then
      break
    end
    for i, member in ipairs(part) do
      if tied[member] then
        out[#out + 1] = member
        at[member] = from + i
        if #out == n then
          break
        end
      end
    end
    from = from + chunk
  end
  return out, at
end

local members = {}
local scores = {}
local place = {} -- a member's place in the list (1-based), where known
local due = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'withscores', 'limit', 0, limit)
for i = 1, #due, 2 do
  members[#members + 1] = due[i]
  scores[#scores + 1] = tonumber(due[i + 1])
end

-- A full batch may cut a tie short, taking some of the items due at its
-- last ms by id rather than the first offered: leave that ms to the next
-- call, or, when the whole batch is one tie, take the first offered of it.
if #members == limit then
  local last = scores[#scores]
  local tied = 0
  for i = #scores, 1, -1 do
    if scores[i] ~= last then
      break
    end
    tied = tied + 1
  end
  local more = redis.call('zrangebyscore', KEYS[2], last, last, 'limit', tied, 1)
  if #more > 0 then
    if tied < #members then
      for _ = 1, tied do
        members[#members] = nil
        scores[#scores] = nil
      end
    else
      local first
      first, place = first_offered(KEYS[3], KEYS[2], last, limit)
      -- Tied members missing from the list (a foreign layout) fill up the
      -- batch, so that it always moves something.
      local chosen = {}
      for _, member in ipairs(first) do
        chosen[member] = true
      end
      for _, member in ipairs(members) do
        if #first == limit then
          break
        end
        if not chosen[member] then
          first[#first + 1] = member
        end
      end
      members = first
    end
  end
end

-- When the due items are the list's head, as usual (items are offered
-- roughly in due order, and a backlog is all due), their places are known
-- and one LTRIM removes them, which keeps a move O(batch) instead of one
-- list scan (LREM) per item. Otherwise only tied items need their places.
if #members > 0 then
  -- One kind per name (kind.lua), checked only when there is something to
  -- move: a mover with nothing due stays quiet whatever the name holds.
  local bad = wrong_kind(KEYS[1], 'list') if bad then return bad end
  local head = redis.call('lrange', KEYS[3], 0, #members - 1)
  local atHead = #head == #members
  local inHead = {}
  for i, member in ipairs(head) do
    inHead[member] = i
  end
  for _, member in ipairs(members) do
    if not inHead[member] then
      atHead = false
      break
    end
  end
  if atHead then
    place = inHead
  end
  local order = {}
  for i = 1, #members do
    order[i] = i
    local tie = (i > 1 and scores[i - 1] == scores[i]) or (i < #members and scores[i + 1] == scores[i])
    if tie and not place[members[i]] then
      -- A member missing from the list (a foreign layout) goes last of its tie.
      place[members[i]] = redis.call('lpos', KEYS[3], members[i]) or math.huge
    end
  end
  table.sort(order, function(a, b)
    if scores[a] ~= scores[b] then
      return scores[a] < scores[b]
    end
    local pa, pb = place[members[a]] or math.huge, place[members[b]] or math.huge
    if pa ~= pb then
      return pa < pb
    end
    return a < b
  end)
  local sorted, sortedScores = {}, {}
  for i, j in ipairs(order) do
    sorted[i], sortedScores[i] = members[j], scores[j]
  end
  members, scores = sorted, sortedScores
  if atHead then
    redis.call('ltrim', KEYS[3], #members, -1)
  else
    for _, member in ipairs(members) do
      redis.call('lrem', KEYS[3], 1, member)
    end
  end
  redis.call('zrem', KEYS[2], unpack(members))
end

local late = {}
if #members > 0 then
  local values = {}
  for i, member in ipairs(members) do
    late[i] = now - scores[i]
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
