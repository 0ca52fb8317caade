-- list_namespaces: one page of a user's namespaces (hex encoded) in ascending byte order.
-- KEYS[1] user's namespace set.
-- ARGV[1] lower bound ('-' or '(' .. hex namespace), ARGV[2] limit + 1.
return redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
