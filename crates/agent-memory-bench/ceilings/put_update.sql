-- put_update: the upsert statement (upsert.sql) on one of the 20,000 preloaded keys (k0000 to
-- k0009 of a user and namespace), so it always takes the ON CONFLICT path.
\set u random(0, 999)
\set ns random(0, 1)
\set k random(0, 9)
