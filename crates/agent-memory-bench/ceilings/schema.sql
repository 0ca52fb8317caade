-- The ceiling's table: the memory store's row shape with nothing of the library around it.
-- bench_ceiling_records      receives the 20,000 standard preload records; the upsert, get and
--                            first-page scripts run against it.
-- bench_ceiling_records_del  holds the same records plus a pool of rows in namespace 'scratch'
--                            (keys d00000000, d00000001, ...) that delete.sql removes one by one,
--                            so every timed DELETE hits a row that is really there.
DROP TABLE IF EXISTS bench_ceiling_records;
DROP TABLE IF EXISTS bench_ceiling_records_del;
CREATE TABLE bench_ceiling_records (
    app        text        NOT NULL,
    user_id    text        NOT NULL,
    namespace  text        NOT NULL,
    key        text        NOT NULL COLLATE "C",
    content    text        NOT NULL,
    metadata   jsonb       NOT NULL DEFAULT '{}'::jsonb,
    revision   bigint      NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    PRIMARY KEY (app, user_id, namespace, key)
);
CREATE TABLE bench_ceiling_records_del (LIKE bench_ceiling_records INCLUDING ALL);
