-- put: insert or replace one record, with its compare-and-set check, in one atomic step.
-- KEYS[1] record string, KEYS[2] namespace index, KEYS[3] user's namespace set,
-- KEYS[4] user's revision floor.
-- ARGV[1] key, ARGV[2] namespace (hex), ARGV[3] mode ('a' always, 'c' create only,
-- 'r' expected revision), ARGV[4] expected revision (18 digits, zero-padded), ARGV[5] the
-- record from its 55th byte on: expiry (18 digits, all zeros for none), content length (8 digits),
-- source length (8 digits), content, source JSON (empty for none), metadata JSON.
-- Returns -1 (a live record exists), -2 (stale revision) or the new header's first 54 bytes:
-- revision, created_at, updated_at (18 digits each).
-- The record layout is described in the module docs (docs.md, "Data model").
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- The fixed-width header: revision, created_at, updated_at, expires_at; '' when absent.
-- (Numbers are formatted with %d and passed to Redis as strings: float formatting is slow.)
local h = redis.call('GETRANGE', KEYS[1], '0', '71')
local exists = h ~= ''
local live = false
if exists then
  local x = string.sub(h, 55, 72)
  live = x == '000000000000000000' or tonumber(x) > now
end
local mode = ARGV[3]
if mode == 'c' then
  if live then return -1 end
elseif mode == 'r' then
  if not live or string.sub(h, 1, 18) ~= ARGV[4] then return -2 end
end
-- Revision: one more than the key's previous revision while its record exists, else one more
-- than the user's floor (raised by every script that removes a record); never below the server
-- time in microseconds. See the module docs for why it never repeats.
local rev
if exists then
  rev = tonumber(string.sub(h, 1, 18)) + 1
else
  rev = tonumber(redis.call('GET', KEYS[4]) or '0') + 1
end
if rev < now then rev = now end
-- Doubles hold every integer below 2^53 (server time in the year 2255): stop before '+ 1' is lost.
if rev >= 9007199254740992 then return redis.error_reply('ERR agent-memory revision out of range') end
local head
if live then
  head = string.format('%018d%s%018d', rev, string.sub(h, 19, 36), now)
else
  head = string.format('%018d%018d%018d', rev, now, now)
end
redis.call('SET', KEYS[1], head .. ARGV[5])
-- The index entries exist exactly while the record does: only a new record adds them.
if not exists then
  redis.call('ZADD', KEYS[2], '0', ARGV[1])
  redis.call('ZADD', KEYS[3], '0', ARGV[2])
end
return head
