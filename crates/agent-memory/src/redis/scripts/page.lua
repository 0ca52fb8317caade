-- list and search: one bounded page of live records in ascending key (byte) order.
-- KEYS[1] namespace index.
-- ARGV[1] record key prefix, ARGV[2] lower bound ('-', '(' .. key or '[' .. list prefix),
-- ARGV[3] limit, ARGV[4] most index entries to inspect, ARGV[5] query ('' for list: every live
-- record), ARGV[6] upper bound ('+', or '(' .. the end of the list prefix's keys).
-- Returns {cursor or nil, key, record, key, record, ...}: each record is the stored string
-- (layout in the module docs). The cursor is the key to continue after: the last returned key
-- when another match follows, or the last inspected key when the scan budget ran out; nil when
-- nothing is left.
local prefix, min = ARGV[1], ARGV[2]
local limit, budget, query, max = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6]
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
    local v
    if found < limit or query ~= '' then
      v = redis.call('GET', prefix .. key)
    else
      -- Only "is there one more?" is left to answer: the header is enough.
      v = redis.call('GETRANGE', prefix .. key, '0', '71')
      if v == '' then v = false end
    end
    local match = false
    if v then
      local x = string.sub(v, 55, 72)
      match = x == '000000000000000000' or tonumber(x) > now
      if match and query ~= '' then
        -- The content runs from byte 89 for the length in bytes 73..80; the first occurrence
        -- from byte 89 on ends inside the content exactly when some occurrence lies in it.
        local _, e = string.find(v, query, 89, true)
        match = e ~= nil and e <= 88 + tonumber(string.sub(v, 73, 80))
      end
    end
    if match then
      if found == limit then
        out[1] = out[#out - 1]
        return out
      end
      found = found + 1
      out[#out + 1] = key
      out[#out + 1] = v
    end
  end
  if #members < want then return out end
  min = '(' .. last
end
out[1] = last
return out
