-- usage: shared by the scripts that add or remove records (put, delete, delete_all, purge).
-- A user's usage is a hash at the user's usage key: n = records held, b = bytes held (key +
-- content + metadata JSON + source JSON, '{}' for none: what the record string holds past its
-- 88-byte header, plus the key and 2 bytes for an empty source). Every script that changes
-- records changes it in the same call. The hash exists exactly while the user holds a record.
-- A user whose records were written before usage was kept has records and no hash: `usage`
-- counts them once, from the records, before the script changes anything.

-- The bytes a record of `len` bytes is charged, `source_len` being its header's source length
-- field (bytes 81 to 88; '00000000' for no source, charged as the 2 bytes of '{}').
local function charged(key_len, len, source_len)
  local b = key_len + len - 88
  if tonumber(source_len) == 0 then b = b + 2 end
  return b
end

-- The bytes the record string at `record` is charged, given its header `h` (its first 88
-- bytes, read already).
local function header_bytes(record, key_len, h)
  return charged(key_len, redis.call('STRLEN', record), string.sub(h, 81, 88))
end

-- The bytes the record string at `record` is charged, or nil when it does not exist.
local function record_bytes(record, key_len)
  local len = redis.call('STRLEN', record)
  if len == 0 then return nil end
  return charged(key_len, len, redis.call('GETRANGE', record, '80', '87'))
end

-- Records and bytes the user holds: from the hash, else counted from the user's namespace set
-- and indexes under `prefix` ('am:{tag}:') and stored in the hash.
local function usage(usage_key, namespaces, prefix)
  local u = redis.call('HMGET', usage_key, 'n', 'b')
  if u[1] then return tonumber(u[1]), tonumber(u[2]) end
  local n, b = 0, 0
  for _, ns in ipairs(redis.call('ZRANGE', namespaces, 0, -1)) do
    local records = prefix .. 'r:' .. ns .. ':'
    for _, key in ipairs(redis.call('ZRANGE', prefix .. 'i:' .. ns, 0, -1)) do
      local rb = record_bytes(records .. key, #key)
      if rb then n, b = n + 1, b + rb end
    end
  end
  if n > 0 then redis.call('HSET', usage_key, 'n', n, 'b', b) end
  return n, b
end

-- Writes the usage hash's two counts, as integers.
local function set_usage(usage_key, n, b)
  redis.call('HSET', usage_key, 'n', string.format('%d', n), 'b', string.format('%d', b))
end

-- Takes `n` removed records of `b` bytes off the usage `held_n`, `held_b` that `usage`
-- returned: one write, as the hash goes with the user's last record.
local function release(usage_key, held_n, held_b, n, b)
  if n == 0 then return end
  if held_n - n <= 0 then
    redis.call('DEL', usage_key)
  else
    set_usage(usage_key, held_n - n, held_b - b)
  end
end
