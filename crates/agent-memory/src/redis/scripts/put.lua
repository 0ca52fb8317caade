-- put: insert or replace one record, with its compare-and-set check, in one atomic step.
-- KEYS[1] record hash, KEYS[2] namespace index, KEYS[3] user's namespace set,
-- KEYS[4] user's revision floor.
-- ARGV[1] key, ARGV[2] namespace (hex), ARGV[3] mode ('a' always, 'c' create only,
-- 'r' expected revision), ARGV[4] expected revision, ARGV[5] content, ARGV[6] metadata JSON,
-- ARGV[7] expires_at in microseconds ('' for none), ARGV[8] source JSON ('' for none).
-- Returns -1 (a live record exists), -2 (stale revision) or {revision, created_at, updated_at}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cur = redis.call('HMGET', KEYS[1], 'r', 'ca', 'x')
local live = cur[1] and (cur[3] == '' or tonumber(cur[3]) > now)
local mode = ARGV[3]
if mode == 'c' then
  if live then return -1 end
elseif mode == 'r' then
  if not live or cur[1] ~= ARGV[4] then return -2 end
end
-- Revision: one more than the key's previous revision while its hash exists, else one more
-- than the user's floor (raised by every script that removes a hash); never below the server
-- time in microseconds. See the module docs for why it never repeats.
local rev
if cur[1] then
  rev = tonumber(cur[1]) + 1
else
  rev = 0
  local floor = redis.call('GET', KEYS[4])
  if floor then rev = tonumber(floor) + 1 end
end
if rev < now then rev = now end
local revs = string.format('%.0f', rev)
local nows = string.format('%.0f', now)
local created = nows
if live then created = cur[2] end
redis.call('HSET', KEYS[1], 'r', revs, 'c', ARGV[5], 'm', ARGV[6], 'ca', created, 'ua', nows,
  'x', ARGV[7], 's', ARGV[8])
if not cur[1] then
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
  redis.call('ZADD', KEYS[3], 0, ARGV[2])
end
return {revs, created, nows}
