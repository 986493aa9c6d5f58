-- A taker has the item a move put in its hold (a request's guard key, as a
-- LIST): the hold goes, and anything else in it, moved by an earlier
-- attempt of the same pop whose reply was lost (go-redis may retry a
-- blocking move after a broken connection), goes back to the head of the
-- queue, in order. With no item taken (ARGV[1] = ""), everything in the
-- hold goes back: the pop's outcome was lost on the way.
-- When an attempt of the pop may still reach Redis (ARGV[3] > 0), the
-- hold's key becomes the request's guard mark ("x", a STRING) for that
-- long: an LMOVE or BLMOVE into it then fails (WRONGTYPE) before it takes
-- anything, so a pop arriving after its hold ended strands no item.
-- KEYS[1] LIST <name>
-- KEYS[2] the hold: actorlock_request:{name}:<request id>
-- ARGV[1] "1" when the taker has an item, "" when it has none
-- ARGV[2] the item the taker has (an empty item is an item)
-- ARGV[3] ms to keep the mark; 0: no attempt of the pop can still arrive
-- Returns how many items went back. Safe to run again: a hold that ended
-- (marked, or gone) returns nothing.
local kind = redis.call('type', KEYS[2]).ok
if kind == 'string' then
  return 0 -- ended already
end
local items = {}
if kind == 'list' then
  items = redis.call('lrange', KEYS[2], 0, -1)
  redis.call('del', KEYS[2])
end
local back, kept = 0, ARGV[1] ~= '1'
for i = #items, 1, -1 do
  if not kept and items[i] == ARGV[2] then
    kept = true
  else
    redis.call('lpush', KEYS[1], items[i])
    back = back + 1
  end
end
if tonumber(ARGV[3]) > 0 then
  redis.call('set', KEYS[2], 'x', 'px', ARGV[3])
end
return back
