-- list and search: one bounded page of live records in ascending key (byte) order.
-- KEYS[1] namespace index.
-- ARGV[1] record key prefix, ARGV[2] lower bound ('-', '(' .. key or '[' .. list prefix),
-- ARGV[3] limit, ARGV[4] most index entries to inspect, ARGV[5] what the content must contain
-- ('' for list: every live record; for search the query, or its first bytes), ARGV[6] upper
-- bound ('+', or '(' .. the end of the list prefix's keys), ARGV[7] most content bytes to
-- inspect ('' for no such bound), ARGV[8] '1' when ARGV[5] is the whole query (list, or a
-- short query), '0' when it is only the query's start and the caller confirms each record.
-- Returns {cursor or nil, key, record, key, record, ...}: each record is the stored string
-- (layout in the module docs). The records are the matches (or candidates) in key order. The
-- cursor is the key to continue after: when ARGV[8] is '1', the last returned key when another
-- match follows; when it is '0', the last returned key once limit + 1 candidates are found
-- (the caller keeps the matches among them); in both cases the last inspected key when a scan
-- budget ran out; nil when nothing is left.
--
-- The match is string.find with plain = true, which compares the needle at each position: its
-- cost per byte is bounded by the needle's length, and the caller never sends more than the
-- query's first 16 bytes, so one call costs at most a small multiple of the bytes it reads.
local prefix, min = ARGV[1], ARGV[2]
local limit, budget, query, max = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6]
local byte_budget = tonumber(ARGV[7]) or math.huge
local exact = ARGV[8] ~= '0'
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local out = {false}
local found, inspected, bytes = 0, 0, 0
local last
while inspected < budget and bytes < byte_budget do
  local want = math.min(limit + 1 - found, budget - inspected)
  local members = redis.call('ZRANGEBYLEX', KEYS[1], min, max, 'LIMIT', 0, want)
  for _, key in ipairs(members) do
    if bytes >= byte_budget then
      out[1] = last
      return out
    end
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
      if query ~= '' then
        -- The content runs from byte 89 for the length in bytes 73..80; the first occurrence
        -- from byte 89 on ends inside the content exactly when some occurrence lies in it.
        local length = tonumber(string.sub(v, 73, 80))
        bytes = bytes + length
        if match then
          local _, e = string.find(v, query, 89, true)
          match = e ~= nil and e <= 88 + length
        end
      end
    end
    if match then
      if found == limit and exact then
        out[1] = out[#out - 1]
        return out
      end
      found = found + 1
      out[#out + 1] = key
      out[#out + 1] = v
      if found > limit then
        out[1] = key
        return out
      end
    end
  end
  if #members < want then return out end
  min = '(' .. last
end
out[1] = last
return out
