-- list: the first 20 live records of one (user, namespace), in key order.
\set u random(0, 999)
\set ns random(0, 1)
SELECT key, content, metadata, revision, created_at, updated_at, expires_at
  FROM bench_ceiling_records
 WHERE app = 'bench-app'
   AND user_id = 'u' || lpad(:u::text, 4, '0')
   AND namespace = (ARRAY['preferences', 'notes'])[:ns::int + 1]
   AND (expires_at IS NULL OR expires_at > now())
 ORDER BY key
 LIMIT 20;
