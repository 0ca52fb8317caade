-- purge_expired: inspect at most ARGV[4] keys of one namespace after a position and remove the
-- expired ones.
-- KEYS[1] namespace index, KEYS[2] user's namespace set, KEYS[3] user's revision floor,
-- KEYS[4] user's usage.
-- ARGV[1] record key prefix, ARGV[2] namespace (hex), ARGV[3] lower bound ('-' or
-- '(' .. key), ARGV[4] limit, ARGV[5] user key prefix ('am:{tag}:').
-- Returns {removed, cursor key or nil}: the cursor is the last inspected key when more keys
-- follow it.
local limit = tonumber(ARGV[4])
local members = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[3], '+', 'LIMIT', 0, limit + 1)
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local removed = 0
local freed = 0
local counted = false
local held_n, held_b
local top = nil
local n = math.min(#members, limit)
for i = 1, n do
  local key = members[i]
  local h = redis.call('GETRANGE', ARGV[1] .. key, '0', '71')
  if h ~= '' then
    local x = string.sub(h, 55, 72)
    if x ~= '000000000000000000' and tonumber(x) <= now then
      if not counted then
        held_n, held_b = usage(KEYS[4], KEYS[2], ARGV[5])
        counted = true
      end
      freed = freed + record_bytes(ARGV[1] .. key, #key)
      redis.call('DEL', ARGV[1] .. key)
      redis.call('ZREM', KEYS[1], key)
      removed = removed + 1
      local r = tonumber(string.sub(h, 1, 18))
      if not top or r > top then top = r end
    end
  end
end
release(KEYS[4], held_n, held_b, removed, freed)
if top then
  local floor = redis.call('GET', KEYS[3])
  if not floor or tonumber(floor) < top then
    redis.call('SET', KEYS[3], string.format('%.0f', top))
  end
  if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[2]) end
end
if #members > limit then return {removed, members[limit]} end
return {removed, false}
