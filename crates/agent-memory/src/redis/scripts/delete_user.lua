-- delete_user: physically remove up to ARGV[2] records of one application user, namespace by
-- namespace, and, once none is left, the user's namespace set and revision floor.
-- KEYS[1] user's namespace set, KEYS[2] user's revision floor, KEYS[3] user's usage (removed
-- with the first batch: a user erased in part is counted again, from what is left, by the next
-- script that needs the count).
-- ARGV[1] user key prefix ('am:{tag}:'), ARGV[2] batch size.
-- Returns {removed, 1 if records remain else 0}.
local prefix = ARGV[1]
local budget = tonumber(ARGV[2])
local removed = 0
redis.call('DEL', KEYS[3])
while budget > 0 do
  local first = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #first == 0 then break end
  local ns = first[1]
  local index = prefix .. 'i:' .. ns
  local members = redis.call('ZRANGE', index, 0, budget - 1)
  local n = #members
  if n > 0 then
    local keys = {}
    local records = prefix .. 'r:' .. ns .. ':'
    for i, key in ipairs(members) do keys[i] = records .. key end
    -- In slices: Lua's unpack cannot spread more than a few thousand values.
    for i = 1, n, 1000 do redis.call('DEL', unpack(keys, i, math.min(i + 999, n))) end
    redis.call('ZREMRANGEBYRANK', index, 0, n - 1)
    removed = removed + n
    budget = budget - n
  end
  if redis.call('EXISTS', index) == 0 then redis.call('ZREM', KEYS[1], ns) end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {removed, 1} end
redis.call('DEL', KEYS[2])
return {removed, 0}
