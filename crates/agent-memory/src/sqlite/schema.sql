-- The SQLite provider's schema, version 2, as a new file gets it.
--
-- schema.rs runs this whole file to create a file (and then sets the application id and the
-- schema version), and takes its parts by name to upgrade a version 1 file. The bench's SQLite
-- ceiling runs it whole, through `agent_memory::sqlite::SCHEMA_SQL`. A part runs from the
-- line that names it to the next such line.

-- part: records
-- One row per record, the whole scope plus the key as its primary key. Version 2 added
-- `bytes` (schema.rs `ADD_BYTES` says what it holds).
CREATE TABLE memory_records (
    app_id TEXT NOT NULL COLLATE BINARY,
    user_id TEXT NOT NULL COLLATE BINARY,
    namespace TEXT NOT NULL COLLATE BINARY,
    key TEXT NOT NULL COLLATE BINARY,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    source_session TEXT,
    source_invocation TEXT,
    source_agent TEXT,
    revision INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER,
    bytes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (app_id, user_id, namespace, key)
) STRICT, WITHOUT ROWID;

-- part: meta
-- Database-wide settings and counters; names no user.
CREATE TABLE memory_meta (
    name TEXT NOT NULL PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- part: usage
-- What each application user holds: one row per user with at least one record, kept by the
-- triggers below in the same transaction as every change to `memory_records`, so no writer
-- (this process or another) can change records without changing the count.
CREATE TABLE memory_usage (
    app_id TEXT NOT NULL COLLATE BINARY,
    user_id TEXT NOT NULL COLLATE BINARY,
    records INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    PRIMARY KEY (app_id, user_id)
) STRICT, WITHOUT ROWID;

-- part: usage triggers
-- The triggers that keep `memory_usage` (schema.rs checks them by name). A user's row goes
-- with their last record, so an erased user leaves nothing behind.
CREATE TRIGGER memory_usage_insert AFTER INSERT ON memory_records BEGIN
    INSERT INTO memory_usage (app_id, user_id, records, bytes)
    VALUES (new.app_id, new.user_id, 1, new.bytes)
    ON CONFLICT (app_id, user_id) DO UPDATE SET
        records = records + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER memory_usage_update AFTER UPDATE OF bytes ON memory_records BEGIN
    UPDATE memory_usage SET bytes = bytes - old.bytes + new.bytes
    WHERE app_id = new.app_id AND user_id = new.user_id;
END;
CREATE TRIGGER memory_usage_delete AFTER DELETE ON memory_records BEGIN
    UPDATE memory_usage SET records = records - 1, bytes = bytes - old.bytes
    WHERE app_id = old.app_id AND user_id = old.user_id;
    DELETE FROM memory_usage
    WHERE app_id = old.app_id AND user_id = old.user_id AND records <= 0;
END;

-- part: counters
-- The last revision handed out (schema.rs `LAST_REVISION`, which every start looks for).
INSERT INTO memory_meta (name, value) VALUES ('last_revision', 0);
