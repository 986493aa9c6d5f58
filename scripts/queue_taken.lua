-- A taker has the item a move put in its hold (a request's guard key, as a
-- LIST): the hold goes, and anything else in it, moved by an earlier
-- attempt of the same pop whose reply was lost (go-redis may retry a
-- blocking move after a broken connection), goes back to the head of the
-- queue, in order. With no item taken (ARGV[1] = ""), everything in the
-- hold goes back: the pop's outcome was lost on the way.
-- KEYS[1] LIST <name>
-- KEYS[2] the hold: actorlock_request:{name}:<request id>
-- ARGV[1] "1" when the taker has an item, "" when it has none
-- ARGV[2] the item the taker has (an empty item is an item)
-- Returns how many items went back. Safe to run again: a hold that is gone
-- returns nothing.
local items = redis.call('lrange', KEYS[2], 0, -1)
redis.call('del', KEYS[2])
local back, kept = 0, ARGV[1] ~= '1'
for i = #items, 1, -1 do
  if not kept and items[i] == ARGV[2] then
    kept = true
  else
    redis.call('lpush', KEYS[1], items[i])
    back = back + 1
  end
end
return back
