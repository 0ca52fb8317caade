-- delete: remove one record and its index entries.
-- KEYS[1] record hash, KEYS[2] namespace index, KEYS[3] user's namespace set,
-- KEYS[4] user's revision floor.
-- ARGV[1] key, ARGV[2] namespace (hex), ARGV[3] expected revision ('' for none).
-- Returns 1 (a live record was removed), 0 (none was live) or -2 (stale revision).
local cur = redis.call('HMGET', KEYS[1], 'r', 'x')
local live = false
if cur[1] then
  live = true
  if cur[2] ~= '' then
    local t = redis.call('TIME')
    live = tonumber(cur[2]) > tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
end
if ARGV[3] ~= '' and (not live or cur[1] ~= ARGV[3]) then return -2 end
if not cur[1] then return 0 end
redis.call('DEL', KEYS[1])
local floor = redis.call('GET', KEYS[4])
if not floor or tonumber(floor) < tonumber(cur[1]) then redis.call('SET', KEYS[4], cur[1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('ZREM', KEYS[3], ARGV[2]) end
if live then return 1 end
return 0
