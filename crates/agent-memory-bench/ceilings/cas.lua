-- The shape of one library write on Redis, without the library: read the record's revision,
-- refuse when the caller named another one, else store the new content under the next revision.
-- KEYS[1] = the record's hash; ARGV[1] = the revision the caller expects, or '*' for an
-- unconditional write; ARGV[2] = the new content. Returns the new revision, or -1 on conflict.
local current = tonumber(redis.call('HGET', KEYS[1], 'rev') or '0')
if ARGV[1] ~= '*' and tonumber(ARGV[1]) ~= current then
  return -1
end
redis.call('HSET', KEYS[1], 'rev', current + 1, 'content', ARGV[2])
return current + 1
