-- put_update: the same upsert statement on one of the 20,000 preloaded keys, so it always takes
-- the ON CONFLICT path.
\set u random(0, 999)
\set ns random(0, 1)
\set k random(0, 9)
INSERT INTO bench_ceiling_records AS r (app, user_id, namespace, key, content, metadata)
VALUES ('bench-app', 'u' || lpad(:u::text, 4, '0'), (ARRAY['preferences', 'notes'])[:ns::int + 1],
        'k' || lpad(:k::text, 4, '0'),
        'project review notes launch launch design project high draft customer agent team customer coffee review project coffee follow project weekly mode design schedule customer morning low prefers user schedule',
        '{"category": "notes", "n": 1}')
ON CONFLICT (app, user_id, namespace, key) DO UPDATE
   SET content = EXCLUDED.content, metadata = EXCLUDED.metadata,
       revision = r.revision + 1, updated_at = now(), expires_at = NULL
RETURNING revision, created_at, updated_at;
