-- get: the live record, or nil.
-- KEYS[1] record hash.
-- Returns {revision, content, metadata, created_at, updated_at, expires_at, source} or nil.
local v = redis.call('HMGET', KEYS[1], 'r', 'c', 'm', 'ca', 'ua', 'x', 's')
if not v[1] then return false end
if v[6] ~= '' then
  local t = redis.call('TIME')
  if tonumber(v[6]) <= tonumber(t[1]) * 1000000 + tonumber(t[2]) then return false end
end
return v
