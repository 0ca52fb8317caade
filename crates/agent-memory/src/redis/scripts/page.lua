-- list and search: one bounded page of live records in ascending key (byte) order.
-- KEYS[1] namespace index.
-- ARGV[1] record key prefix, ARGV[2] lower bound ('-', '(' .. key or '[' .. list prefix),
-- ARGV[3] limit, ARGV[4] most index entries to inspect, ARGV[5] upper bound ('+', or '(' ..
-- the end of the list prefix's keys), ARGV[6] most bytes to inspect ('' for no such bound: a
-- list without a metadata filter, which tests nothing but expiry), ARGV[7] '1' when the tests
-- below are exact (a live record that passes them is a match), '0' when they only narrow and
-- the caller confirms each record, ARGV[8] how the needles narrow: '' not at all, 'all' (every
-- needle occurs in the content) or 'any' (one does), ARGV[9] '1' when the needles are looked
-- for in the content with its ASCII letters lowered (a case-insensitive search), '0' in the
-- content as it is, ARGV[10] the metadata filter as a JSON object ('' for none), ARGV[11..] the
-- needles.
-- Returns {cursor or nil, key, record, key, record, ...}: each record is the stored string
-- (layout in the module docs). The records are the matches (or candidates) in key order. The
-- cursor is the key to continue after: when ARGV[7] is '1', the last returned key when another
-- match follows; when it is '0', the last returned key once limit + 1 candidates are found
-- (the caller keeps the matches among them); in both cases the last inspected key when a scan
-- budget ran out; nil when nothing is left.
--
-- Every needle is at most 16 bytes and looked for with string.find with plain = true, which
-- compares the needle at each position: its cost per byte is bounded by the needle's length,
-- and the caller divides the byte budget among the needles, so one call costs at most a small
-- multiple of the bytes it may read. Decoding metadata costs a few times more per byte than
-- that, so each metadata byte decoded counts four towards the byte budget.
local prefix, min, max = ARGV[1], ARGV[2], ARGV[5]
local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local counting = ARGV[6] ~= ''
local byte_budget = tonumber(ARGV[6]) or math.huge
local exact, narrow, lowered = ARGV[7] ~= '0', ARGV[8], ARGV[9] == '1'
local filter = false
if ARGV[10] ~= '' then filter = cjson.decode(ARGV[10]) end
local needles = {}
for i = 11, #ARGV do
  -- string.lower maps bytes one to one: content that holds a needle holds it lowered too.
  needles[#needles + 1] = lowered and string.lower(ARGV[i]) or ARGV[i]
end
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local out = {false}
local found, inspected, bytes = 0, 0, 0
local last

-- Whether the needles occur in the content of the stored string v: its bytes 89 .. 88 + length.
local function holds_needles(v, length)
  if narrow == '' then return true end
  local text, from, to = v, 89, 88 + length
  if lowered then
    text, from, to = string.lower(string.sub(v, from, to)), 1, length
  end
  local any = narrow == 'any'
  for _, needle in ipairs(needles) do
    -- The first occurrence from `from` on ends by `to` exactly when some occurrence lies in
    -- the content.
    local _, e = string.find(text, needle, from, true)
    if (e ~= nil and e <= to) == any then return any end
  end
  return not any
end

-- Whether the metadata of the stored string v (after its content of `length` bytes and its
-- source) holds every field of the filter: strings, booleans and null exactly, numbers as
-- numbers (Lua's, so a superset of the matches for numbers beyond 2^53; the caller confirms).
local function holds_fields(v, length)
  local metadata = string.sub(v, 89 + length + tonumber(string.sub(v, 81, 88)))
  if metadata == '{}' then return false end
  bytes = bytes + 4 * #metadata
  local ok, fields = pcall(cjson.decode, metadata)
  if not ok or type(fields) ~= 'table' then return true end
  for name, want in pairs(filter) do
    if fields[name] ~= want then return false end
  end
  return true
end

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
    if found < limit or counting then
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
      if counting then
        -- The content runs from byte 89 for the length in bytes 73..80.
        local length = tonumber(string.sub(v, 73, 80))
        bytes = bytes + length
        if match then match = holds_needles(v, length) end
        if match and filter then match = holds_fields(v, length) end
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
