-- list_keys: one bounded page of live keys in ascending key (byte) order, each with its
-- content's length, read from the record's header alone (GETRANGE of its first 80 bytes), so no
-- content leaves the record.
-- KEYS[1] namespace index.
-- ARGV[1] record key prefix, ARGV[2] lower bound ('-', '(' .. key or '[' .. list prefix),
-- ARGV[3] limit, ARGV[4] most index entries to inspect, ARGV[5] upper bound ('+', or '(' ..
-- the end of the prefix's keys).
-- Returns {cursor or nil, key, length, key, length, ...}: up to limit + 1 live keys (one more
-- than the limit says that more follow; the caller drops it), then a cursor, the last
-- inspected key, only when the inspection budget ran out first; nil otherwise.
local prefix, min, max = ARGV[1], ARGV[2], ARGV[5]
local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local out = {false}
local found, inspected = 0, 0
local last
while inspected < budget do
  local want = math.min(limit + 1 - found, budget - inspected)
  local members = redis.call('ZRANGEBYLEX', KEYS[1], min, max, 'LIMIT', 0, want)
  for _, key in ipairs(members) do
    inspected = inspected + 1
    last = key
    local v = redis.call('GETRANGE', prefix .. key, '0', '79')
    if v ~= '' then
      local x = string.sub(v, 55, 72)
      if x == '000000000000000000' or tonumber(x) > now then
        found = found + 1
        out[#out + 1] = key
        out[#out + 1] = tonumber(string.sub(v, 73, 80))
        if found > limit then return out end
      end
    end
  end
  if #members < want then return out end
  min = '(' .. last
end
out[1] = last
return out
