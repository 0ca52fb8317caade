-- put_new: the upsert statement (upsert.sql) on a key nobody has written yet, n and the id in
-- eight digits. Each client numbers its own keys: started with -D seq=0 -D nc=<clients>,
-- client c writes ids c + nc, c + 2 nc, ... which no other client ever uses.
\set seq :seq + 1
\set id :seq * :nc + :client_id
\set u random(0, 999)
\set ns random(0, 1)
