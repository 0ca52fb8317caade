-- put: insert or replace one record, with its compare-and-set check, in one atomic step.
-- KEYS[1] record string, KEYS[2] namespace index, KEYS[3] user's namespace set,
-- KEYS[4] user's revision floor, KEYS[5] user's usage.
-- ARGV[1] key, ARGV[2] namespace (hex), ARGV[3] mode ('a' always, 'c' create only,
-- 'r' expected revision), ARGV[4] expected revision (18 digits, zero-padded), ARGV[5] user key
-- prefix ('am:{tag}:'), ARGV[6] the new record's bytes, ARGV[7] max records per user ('' for
-- none), ARGV[8] max bytes per user ('' for none), ARGV[9] the record from its 55th byte on:
-- expiry (18 digits, all zeros for none), content length (8 digits), source length (8 digits),
-- content, source JSON (empty for none), metadata JSON. ARGV[10] '1' once the client has put
-- the user in the application's user index ('0' before).
-- Returns -1 (a live record exists), -2 (stale revision), -3 (past max records), -4 (past max
-- bytes), -5 (the user's first record, and the user is not known to be indexed: nothing was
-- written) or the new header's first 54 bytes: revision, created_at, updated_at (18 digits
-- each).
-- The record layout is described in the module docs (docs.md, "Data model").
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- The fixed-width header: revision, created_at, updated_at, expires_at, content length,
-- source length; '' when absent.
-- (Numbers are formatted with %d and passed to Redis as strings: float formatting is slow.)
local h = redis.call('GETRANGE', KEYS[1], '0', '87')
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
-- The user index is in another slot, so the client keeps it: a user is in it before the user's
-- first record exists. A user without a namespace set holds no record; until the client says it
-- indexed the user, write nothing and ask it to.
if not exists and ARGV[10] ~= '1' and redis.call('EXISTS', KEYS[3]) == 0 then return -5 end
-- Quotas: the user's usage, and what this write adds to it (a replacement, of a live or an
-- expired record, adds no record and only the difference in bytes). Only growth is checked.
local held_n, held_b = usage(KEYS[5], KEYS[3], ARGV[5])
local add_n, add_b = 1, tonumber(ARGV[6])
if exists then
  add_n = 0
  add_b = add_b - header_bytes(KEYS[1], #ARGV[1], h)
end
if ARGV[7] ~= '' and add_n > 0 and held_n + add_n > tonumber(ARGV[7]) then return -3 end
if ARGV[8] ~= '' and add_b > 0 and held_b + add_b > tonumber(ARGV[8]) then return -4 end
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
redis.call('SET', KEYS[1], head .. ARGV[9])
if add_n ~= 0 or add_b ~= 0 then
  set_usage(KEYS[5], held_n + add_n, held_b + add_b)
end
-- The index entries exist exactly while the record does: only a new record adds them.
if not exists then
  redis.call('ZADD', KEYS[2], '0', ARGV[1])
  redis.call('ZADD', KEYS[3], '0', ARGV[2])
end
return head
