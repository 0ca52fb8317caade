-- list and search: one bounded page of live records in ascending key (byte) order.
-- KEYS[1] namespace index.
-- ARGV[1] record key prefix, ARGV[2] lower bound ('-' or '(' .. key), ARGV[3] limit,
-- ARGV[4] most index entries to inspect, ARGV[5] query ('' for list: every live record).
-- Returns {cursor or nil, key, revision, content, metadata, created_at, updated_at,
-- expires_at, source, key, ...}: eight fields per record. The cursor is the key to continue
-- after: the last returned key when another match follows, or the last inspected key when the
-- scan budget ran out; nil when nothing is left.
local prefix, min = ARGV[1], ARGV[2]
local limit, budget, query = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {false}
local found, inspected = 0, 0
local last
while inspected < budget do
  local want = math.min(limit + 1 - found, budget - inspected)
  local members = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, want)
  for _, key in ipairs(members) do
    inspected = inspected + 1
    last = key
    local v
    if found < limit or query ~= '' then
      v = redis.call('HMGET', prefix .. key, 'r', 'c', 'm', 'ca', 'ua', 'x', 's')
    else
      -- Only "is there one more?" is left to answer: skip the content.
      v = redis.call('HMGET', prefix .. key, 'r', 'x', 'x', 'x', 'x', 'x')
    end
    if v[1] and (v[6] == '' or tonumber(v[6]) > now)
        and (query == '' or string.find(v[2], query, 1, true)) then
      if found == limit then
        out[1] = out[#out - 7]
        return out
      end
      found = found + 1
      out[#out + 1] = key
      for i = 1, 7 do out[#out + 1] = v[i] end
    end
  end
  if #members < want then return out end
  min = '(' .. last
end
out[1] = last
return out
