-- delete_all: physically remove up to ARGV[3] records of one namespace, expired ones included.
-- KEYS[1] namespace index, KEYS[2] user's namespace set, KEYS[3] user's revision floor,
-- KEYS[4] user's usage.
-- ARGV[1] record key prefix, ARGV[2] namespace (hex), ARGV[3] batch size, ARGV[4] user key
-- prefix ('am:{tag}:').
-- Returns {removed, 1 if records remain else 0}.
local members = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)
local n = #members
if n > 0 then
  local keys = {}
  local top = tonumber(redis.call('GET', KEYS[3]) or '0')
  local raised = false
  local gone, freed = 0, 0
  local held_n, held_b = usage(KEYS[4], KEYS[2], ARGV[4])
  for i, key in ipairs(members) do
    keys[i] = ARGV[1] .. key
    local rb = record_bytes(keys[i], #key)
    if rb then gone, freed = gone + 1, freed + rb end
    -- The revision is the record's first 18 bytes ('' if the record is missing).
    local r = tonumber(redis.call('GETRANGE', keys[i], '0', '17')) or 0
    if r > top then top, raised = r, true end
  end
  release(KEYS[4], held_n, held_b, gone, freed)
  -- In slices: Lua's unpack cannot spread more than a few thousand values.
  for i = 1, n, 1000 do redis.call('DEL', unpack(keys, i, math.min(i + 999, n))) end
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
  if raised then redis.call('SET', KEYS[3], string.format('%.0f', top)) end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {n, 1} end
redis.call('ZREM', KEYS[2], ARGV[2])
return {n, 0}
