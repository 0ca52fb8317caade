//! The on-disk schema: how a file is recognised, created and checked.
//!
//! See the [module docs](super) for the layout and the reasoning behind it.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::config::Settings;
use super::error::{detected, storage};
use crate::error::Result;

/// `PRAGMA application_id` of an agent-memory database: ASCII `AGME`.
pub(super) const APPLICATION_ID: i64 = 0x4147_4D45;

/// `PRAGMA user_version` this release writes and reads. A later release that changes the
/// layout raises it and migrates files whose version is lower.
pub(super) const SCHEMA_VERSION: i64 = 1;

/// The records table: one row per record, the whole scope plus the key as its primary key.
pub(super) const CREATE_RECORDS: &str = "CREATE TABLE memory_records (
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
    PRIMARY KEY (app_id, user_id, namespace, key)
) STRICT, WITHOUT ROWID";

/// Database-wide settings and counters; names no user.
const CREATE_META: &str = "CREATE TABLE memory_meta (
    name TEXT NOT NULL PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT, WITHOUT ROWID";

/// The meta row holding the last revision handed out.
pub(super) const LAST_REVISION: &str = "last_revision";

/// Expected `(name, declared type, not null, primary key position)` of each column.
const RECORD_COLUMNS: &[(&str, &str, bool, i64)] = &[
    ("app_id", "TEXT", true, 1),
    ("user_id", "TEXT", true, 2),
    ("namespace", "TEXT", true, 3),
    ("key", "TEXT", true, 4),
    ("content", "TEXT", true, 0),
    ("metadata", "TEXT", true, 0),
    ("source_session", "TEXT", false, 0),
    ("source_invocation", "TEXT", false, 0),
    ("source_agent", "TEXT", false, 0),
    ("revision", "INTEGER", true, 0),
    ("created_at", "INTEGER", true, 0),
    ("updated_at", "INTEGER", true, 0),
    ("expires_at", "INTEGER", false, 0),
];

const META_COLUMNS: &[(&str, &str, bool, i64)] =
    &[("name", "TEXT", true, 1), ("value", "INTEGER", true, 0)];

/// Which role a connection plays; readers never write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Writer,
    Reader,
}

/// Opens one connection and applies the per-connection settings. Touches nothing on disk
/// beyond what opening a SQLite file does (it creates an absent file only for a writable
/// writer).
pub(super) fn connect(path: &Path, settings: &Settings, role: Role) -> Result<Connection> {
    // No SQLITE_OPEN_URI: the path is always a plain file name, never parsed as a URI.
    let access = if role == Role::Writer && !settings.read_only {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    } else {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    };
    let conn = Connection::open_with_flags(path, access | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(storage("opening the database file failed"))?;
    conn.busy_timeout(settings.busy_timeout)
        .map_err(storage("configuring the connection failed"))?;
    conn.set_prepared_statement_cache_capacity(32);
    // Plans never depend on bound values (every query is a primary-key seek or range), so
    // keep them stable: without this, rebinding some parameters makes SQLite re-plan.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(storage("configuring the connection failed"))?;
    // Per-connection settings only: none of these writes to the file.
    let synchronous = settings.synchronous.pragma();
    let pragmas = format!(
        "PRAGMA synchronous = {synchronous}; PRAGMA cache_size = -{}; PRAGMA mmap_size = {};",
        settings.cache_kib, settings.mmap_bytes
    );
    conn.execute_batch(&pragmas).map_err(storage("configuring the connection failed"))?;
    if role == Role::Writer && !settings.read_only {
        // Erased records are overwritten with zeros, not just unlinked: after `delete_user` the
        // user's content is gone from the database file, not merely unreachable.
        conn.execute_batch("PRAGMA secure_delete = ON")
            .map_err(storage("configuring the connection failed"))?;
    }
    Ok(conn)
}

/// What a file holds, judged by reading only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// No tables and no identifying header fields: free to claim (a new or zero-length file).
    Empty,
    /// Ours, at this schema version.
    Ours(i64),
    /// Some other application's database.
    Foreign,
}

fn inspect(conn: &Connection) -> Result<Found> {
    let what = "reading the database header failed";
    let application_id: i64 =
        conn.query_row("PRAGMA application_id", [], |row| row.get(0)).map_err(storage(what))?;
    let version: i64 =
        conn.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(storage(what))?;
    let objects: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
        .map_err(storage(what))?;
    Ok(if application_id == APPLICATION_ID {
        Found::Ours(version)
    } else if application_id == 0 && version == 0 && objects == 0 {
        Found::Empty
    } else {
        Found::Foreign
    })
}

/// Makes sure the file behind the writer connection holds this release's schema: creates it in
/// an empty file, checks it in an existing one. Nothing is written to a file that is not empty
/// and not ours, so a foreign or corrupt file is left exactly as it was.
pub(super) fn prepare(conn: &mut Connection, settings: &Settings) -> Result<()> {
    match inspect(conn)? {
        Found::Foreign => Err(foreign()),
        Found::Ours(version) => {
            check(conn, version)?;
            if !settings.read_only {
                ensure_wal(conn)?;
            }
            Ok(())
        }
        Found::Empty if settings.read_only => {
            Err(detected("the file holds no agent-memory database and the store is read-only"))
        }
        Found::Empty => {
            ensure_wal(conn)?;
            // Another process may be creating the schema at the same moment: look again under
            // the write lock, and create only if the file is still empty.
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(storage("creating the schema failed"))?;
            match inspect(&tx)? {
                Found::Foreign => return Err(foreign()),
                Found::Ours(version) => check(&tx, version)?,
                Found::Empty => create(&tx)?,
            }
            tx.commit().map_err(storage("creating the schema failed"))
        }
    }
}

fn foreign() -> crate::MemoryError {
    detected("the file holds a database of another application")
}

fn ensure_wal(conn: &Connection) -> Result<()> {
    let what = "switching to write-ahead logging failed";
    let mode: String =
        conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)).map_err(storage(what))?;
    if mode.eq_ignore_ascii_case("wal") {
        Ok(())
    } else {
        Err(detected(what))
    }
}

fn create(conn: &Connection) -> Result<()> {
    let sql = format!(
        "{CREATE_RECORDS};
         {CREATE_META};
         INSERT INTO memory_meta (name, value) VALUES ('{LAST_REVISION}', 0);
         PRAGMA application_id = {APPLICATION_ID};
         PRAGMA user_version = {SCHEMA_VERSION};"
    );
    conn.execute_batch(&sql).map_err(storage("creating the schema failed"))
}

/// Checks that a file marked as ours has the tables and columns this release expects.
fn check(conn: &Connection, version: i64) -> Result<()> {
    if version > SCHEMA_VERSION {
        return Err(detected("the database was written by a newer release of agent-memory"));
    }
    if version < SCHEMA_VERSION {
        // Version 1 is the first layout; a lower number on a file carrying our id is damage.
        return Err(detected("the database schema is not one this release knows"));
    }
    let mismatch = || detected("the database schema does not match this release");
    if !same_columns(&columns(conn, "memory_records")?, RECORD_COLUMNS)
        || !same_columns(&columns(conn, "memory_meta")?, META_COLUMNS)
    {
        return Err(mismatch());
    }
    let counters: i64 = conn
        .query_row("SELECT count(*) FROM memory_meta WHERE name = ?1", [LAST_REVISION], |row| {
            row.get(0)
        })
        .map_err(storage("checking the schema failed"))?;
    if counters != 1 {
        return Err(mismatch());
    }
    Ok(())
}

fn columns(conn: &Connection, table: &str) -> Result<Vec<(String, String, bool, i64)>> {
    let what = "checking the schema failed";
    let mut stmt = conn
        .prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1) ORDER BY cid")
        .map_err(storage(what))?;
    let rows = stmt
        .query_map([table], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, bool>(2)?,
                row.get(3)?,
            ))
        })
        .map_err(storage(what))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(storage(what))
}

fn same_columns(
    found: &[(String, String, bool, i64)],
    expected: &[(&str, &str, bool, i64)],
) -> bool {
    found.len() == expected.len()
        && found
            .iter()
            .zip(expected)
            .all(|(f, e)| f.0 == e.0 && f.1.eq_ignore_ascii_case(e.1) && f.2 == e.2 && f.3 == e.3)
}
