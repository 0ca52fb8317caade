-- The upsert statement put_new.sql and put_update.sql run: the harness appends it to each of
-- them, with {key} replaced by the key expression of that script's test. Its variables: u (the
-- user, 0 to 999) and ns (the namespace, 0 or 1), and whatever the key expression reads.
INSERT INTO bench_ceiling_records AS r (app, user_id, namespace, key, content, metadata)
VALUES ('bench-app', 'u' || lpad(:u::text, 4, '0'), (ARRAY['preferences', 'notes'])[:ns::int + 1],
        {key},
        'project review notes launch launch design project high draft customer agent team customer coffee review project coffee follow project weekly mode design schedule customer morning low prefers user schedule',
        '{"category": "notes", "n": 1}')
ON CONFLICT (app, user_id, namespace, key) DO UPDATE
   SET content = EXCLUDED.content, metadata = EXCLUDED.metadata,
       revision = r.revision + 1, updated_at = now(), expires_at = NULL
RETURNING revision, created_at, updated_at;
