-- get: the live record, or nil.
-- KEYS[1] record string.
-- Returns the stored record string (layout in the module docs) or nil. The server clock is read
-- only for a record that has an expiry.
local v = redis.call('GET', KEYS[1])
if not v then return false end
local x = string.sub(v, 55, 72)
if x ~= '000000000000000000' then
  local t = redis.call('TIME')
  if tonumber(x) <= t[1] * 1000000 + t[2] then return false end
end
return v
