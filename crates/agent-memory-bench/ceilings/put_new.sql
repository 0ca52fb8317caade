-- put_new: the upsert statement on a key nobody has written yet. Each client numbers its own
-- keys: started with -D seq=0 -D nc=<clients>, client c writes ids c + nc, c + 2 nc, ... which
-- no other client ever uses.
\set seq :seq + 1
\set id :seq * :nc + :client_id
\set u random(0, 999)
\set ns random(0, 1)
INSERT INTO bench_ceiling_records AS r (app, user_id, namespace, key, content, metadata)
VALUES ('bench-app', 'u' || lpad(:u::text, 4, '0'), (ARRAY['preferences', 'notes'])[:ns::int + 1],
        'n' || lpad(:id::text, 8, '0'),
        'project review notes launch launch design project high draft customer agent team customer coffee review project coffee follow project weekly mode design schedule customer morning low prefers user schedule',
        '{"category": "notes", "n": 1}')
ON CONFLICT (app, user_id, namespace, key) DO UPDATE
   SET content = EXCLUDED.content, metadata = EXCLUDED.metadata,
       revision = r.revision + 1, updated_at = now(), expires_at = NULL
RETURNING revision, created_at, updated_at;
