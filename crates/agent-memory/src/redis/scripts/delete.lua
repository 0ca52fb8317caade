-- delete: remove one record and its index entries.
-- KEYS[1] record string, KEYS[2] namespace index, KEYS[3] user's namespace set,
-- KEYS[4] user's revision floor, KEYS[5] user's usage.
-- ARGV[1] key, ARGV[2] namespace (hex), ARGV[3] expected revision (18 digits, zero-padded;
-- '' for none), ARGV[4] user key prefix ('am:{tag}:').
-- Returns 1 (a live record was removed), 0 (none was live) or -2 (stale revision).
local h = redis.call('GETRANGE', KEYS[1], '0', '87')
local live = false
if h ~= '' then
  live = true
  local x = string.sub(h, 55, 72)
  if x ~= '000000000000000000' then
    local t = redis.call('TIME')
    live = tonumber(x) > t[1] * 1000000 + t[2]
  end
end
if ARGV[3] ~= '' and (not live or string.sub(h, 1, 18) ~= ARGV[3]) then return -2 end
if h == '' then return 0 end
local held_n, held_b = usage(KEYS[5], KEYS[3], ARGV[4])
release(KEYS[5], held_n, held_b, 1, header_bytes(KEYS[1], #ARGV[1], h))
redis.call('DEL', KEYS[1])
local rev = tonumber(string.sub(h, 1, 18))
local floor = redis.call('GET', KEYS[4])
if not floor or tonumber(floor) < rev then
  redis.call('SET', KEYS[4], string.format('%.0f', rev))
end
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('ZREM', KEYS[3], ARGV[2]) end
if live then return 1 end
return 0
