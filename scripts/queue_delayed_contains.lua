-- Whether a delayed queue holds an item with this value (not yet moved).
-- KEYS[1] redisson_delay_queue:{name}  LIST of members
-- ARGV[1] value
-- Returns 1 or 0. Reads the list in chunks so a long queue does not need
-- one huge reply in memory.
local chunk = 1000
local from = 0
while true do
  local members = redis.call('lrange', KEYS[1], from, from + chunk - 1)
  for _, member in ipairs(members) do
    local ok, _, value = pcall(struct.unpack, 'Bc0Lc0', member)
    if ok and value == ARGV[1] then
      return 1
    end
  end
  if #members < chunk then
    return 0
  end
  from = from + chunk
end
