-- The shape of one library list or search page on Redis, without the library: the first
-- ARGV[1] + 1 keys of a scope's ordered index (a page over-fetches one to know whether more
-- follow), each record read, kept when it contains ARGV[2] ('*' keeps every record).
-- KEYS[1] = the scope's index, a sorted set with all scores 0, `…:i:<n>`; its records are the
-- strings `…:v:<n>:<key>`. Returns {key, record, key, record, ...}.
local limit, query = tonumber(ARGV[1]), ARGV[2]
local prefix = string.gsub(KEYS[1], ':i:', ':v:', 1) .. ':'
local out = {}
for _, key in ipairs(redis.call('ZRANGEBYLEX', KEYS[1], '-', '+', 'LIMIT', 0, limit + 1)) do
  local v = redis.call('GET', prefix .. key)
  if v and (query == '*' or string.find(v, query, 1, true)) then
    out[#out + 1] = key
    out[#out + 1] = v
  end
end
return out
