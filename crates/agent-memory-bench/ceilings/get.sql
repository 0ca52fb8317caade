-- get: read one record by its full primary key; any of the 20,000 preloaded keys, uniformly.
\set u random(0, 999)
\set ns random(0, 1)
\set k random(0, 9)
SELECT content, metadata, revision, created_at, updated_at, expires_at
  FROM bench_ceiling_records
 WHERE app = 'bench-app'
   AND user_id = 'u' || lpad(:u::text, 4, '0')
   AND namespace = (ARRAY['preferences', 'notes'])[:ns::int + 1]
   AND key = 'k' || lpad(:k::text, 4, '0')
   AND (expires_at IS NULL OR expires_at > now());
