//! The on-disk schema: how a file is recognised, created and checked.
//!
//! See the [module docs](super) for the layout and the reasoning behind it.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use super::config::Options;
use super::error::{detected, storage};
use crate::error::Result;
use crate::record::{Metadata, Source};

/// `PRAGMA application_id` of an agent-memory database: ASCII `AGME`.
pub(super) const APPLICATION_ID: i64 = 0x4147_4D45;

/// `PRAGMA user_version` this release writes and reads. A later release that changes the
/// layout raises it and migrates files whose version is lower.
pub(super) const SCHEMA_VERSION: i64 = 2;

/// The statements that give a new file its tables, usage triggers and revision counter, in
/// the order they run: `schema.sql`, the one copy of the layout. `create` runs it whole and
/// `upgrade_in` runs its `usage` parts; the bench's SQLite ceiling builds its scratch file
/// from it, which is why it is exported (hidden: it is no part of the store's API). It sets
/// neither `application_id` nor `user_version`: only the store marks a file as its own.
pub const SCHEMA_SQL: &str = include_str!("schema.sql");

/// The records table alone, for the query-plan tests.
#[cfg(test)]
pub(super) const CREATE_RECORDS: &str = part("records");

/// The column version 2 added: what the record is charged for quotas
/// ([`record_bytes`](crate::quota::record_bytes)), written by `put`. Last, where `ALTER TABLE
/// ADD COLUMN` puts it when a version 1 file is upgraded.
const ADD_BYTES: &str = "ALTER TABLE memory_records ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0";

/// What each application user holds, one row per user with at least one record.
const CREATE_USAGE: &str = part("usage");

/// The triggers that keep `memory_usage` in the same transaction as every change to
/// `memory_records`.
const CREATE_USAGE_TRIGGERS: &str = part("usage triggers");

/// The names of the usage triggers, for the schema check.
const USAGE_TRIGGERS: [&str; 3] =
    ["memory_usage_insert", "memory_usage_update", "memory_usage_delete"];

/// The part of [`SCHEMA_SQL`] called `name`: the lines after the line `-- part: {name}` up to
/// the next part, trimmed. Evaluated at compile time, so a part missing from the file fails
/// the build.
const fn part(name: &str) -> &'static str {
    const MARK: &[u8] = b"\n-- part: ";
    let mut rest = SCHEMA_SQL.as_bytes();
    loop {
        let Some(at) = find(rest, MARK) else { panic!("schema.sql lacks a part") };
        rest = rest.split_at(at + MARK.len()).1;
        let (line, after) = rest.split_at(match find(rest, b"\n") {
            Some(end) => end,
            None => rest.len(),
        });
        if line.len() == name.len() && matches!(find(line, name.as_bytes()), Some(0)) {
            rest = after;
            break;
        }
    }
    let end = match find(rest, MARK) {
        Some(at) => at,
        None => rest.len(),
    };
    match std::str::from_utf8(rest.split_at(end).0.trim_ascii()) {
        Ok(part) => part,
        Err(_) => panic!("schema.sql is not UTF-8"),
    }
}

/// Where `needle` first stands in `haystack`; a `const fn`, as [`part`] needs.
const fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let mut at = 0;
    while at + needle.len() <= haystack.len() {
        let mut i = 0;
        while i < needle.len() && haystack[at + i] == needle[i] {
            i += 1;
        }
        if i == needle.len() {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// The meta row holding the last revision handed out (the `counters` part of [`SCHEMA_SQL`]
/// names it too; `check` finds a file without it damaged).
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
    ("bytes", "INTEGER", true, 0),
];

const USAGE_COLUMNS: &[(&str, &str, bool, i64)] = &[
    ("app_id", "TEXT", true, 1),
    ("user_id", "TEXT", true, 2),
    ("records", "INTEGER", true, 0),
    ("bytes", "INTEGER", true, 0),
];

const META_COLUMNS: &[(&str, &str, bool, i64)] =
    &[("name", "TEXT", true, 1), ("value", "INTEGER", true, 0)];

/// Which role a connection plays; readers never write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Writer,
    Reader,
    /// Copies the write-ahead log into the database file, beside the writer (see
    /// [`pool`](super::pool)); it changes no record, but a checkpoint writes to the file.
    Checkpointer,
}

/// Opens one connection and applies the per-connection settings. Touches nothing on disk
/// beyond what opening a SQLite file does (it creates an absent file only for a writable
/// writer).
pub(super) fn connect(path: &Path, options: &Options, role: Role) -> Result<Connection> {
    // No SQLITE_OPEN_URI: the path is always a plain file name, never parsed as a URI.
    let access = match role {
        _ if options.read_only => OpenFlags::SQLITE_OPEN_READ_ONLY,
        Role::Writer if options.create => {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        }
        Role::Writer => OpenFlags::SQLITE_OPEN_READ_WRITE,
        Role::Checkpointer => OpenFlags::SQLITE_OPEN_READ_WRITE,
        Role::Reader => OpenFlags::SQLITE_OPEN_READ_ONLY,
    };
    let conn = Connection::open_with_flags(path, access | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(storage("opening the database file failed"))?;
    conn.busy_timeout(options.busy_timeout)
        .map_err(storage("configuring the connection failed"))?;
    conn.set_prepared_statement_cache_capacity(32);
    // Plans never depend on bound values (every query is a primary-key seek or range), so
    // keep them stable: without this, rebinding some parameters makes SQLite re-plan.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(storage("configuring the connection failed"))?;
    // Per-connection settings only: none of these writes to the file.
    let synchronous = options.synchronous.pragma();
    let pragmas = format!(
        "PRAGMA synchronous = {synchronous}; PRAGMA cache_size = -{}; PRAGMA mmap_size = {};",
        options.cache_kib, options.mmap_bytes
    );
    conn.execute_batch(&pragmas).map_err(storage("configuring the connection failed"))?;
    if role == Role::Writer && !options.read_only {
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

/// What the file holds. One statement, so the three values come from one snapshot: read one
/// at a time, outside a transaction, they could straddle another connection's commit of the
/// schema and show its tables beside the header of an empty file.
fn inspect(conn: &Connection) -> Result<Found> {
    let (application_id, version, objects): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT application_id FROM pragma_application_id), \
                    (SELECT user_version FROM pragma_user_version), \
                    (SELECT count(*) FROM sqlite_schema)",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .map_err(storage("reading the database header failed"))?;
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
pub(super) fn prepare(conn: &mut Connection, options: &Options) -> Result<()> {
    match inspect(conn)? {
        Found::Foreign => Err(foreign()),
        Found::Ours(1) if !options.read_only => {
            ensure_wal(conn, options.busy_timeout)?;
            upgrade(conn)
        }
        Found::Ours(1) => {
            Err(detected("the database has schema version 1: open it once writable to upgrade it"))
        }
        Found::Ours(version) => {
            check(conn, version)?;
            if !options.read_only {
                ensure_wal(conn, options.busy_timeout)?;
            }
            Ok(())
        }
        Found::Empty if options.read_only => {
            Err(detected("the file holds no agent-memory database and the store is read-only"))
        }
        Found::Empty => {
            ensure_wal(conn, options.busy_timeout)?;
            // Another process may be creating the schema at the same moment: look again under
            // the write lock, and create only if the file is still empty.
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(storage("creating the schema failed"))?;
            match inspect(&tx)? {
                Found::Foreign => return Err(foreign()),
                Found::Ours(1) => upgrade_in(&tx)?,
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

/// Switches the file to write-ahead logging (a no-op once it is), waiting up to `patience` for
/// other connections.
///
/// Two processes opening a new file at once both switch it, and each switch reads the file
/// before it takes the exclusive lock; SQLite then refuses one of them at once with `BUSY`
/// instead of calling its busy handler, since both waiting on each other could deadlock. So
/// a refused switch is tried again here until the busy timeout would have run out. Switching
/// is idempotent and writes no record.
fn ensure_wal(conn: &Connection, patience: Duration) -> Result<()> {
    let what = "switching to write-ahead logging failed";
    let deadline = Instant::now() + patience;
    let mode: String = loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Err(err)
                if err.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => break other.map_err(storage(what))?,
        }
    };
    if mode.eq_ignore_ascii_case("wal") {
        Ok(())
    } else {
        Err(detected(what))
    }
}

fn create(conn: &Connection) -> Result<()> {
    let sql = format!(
        "{SCHEMA_SQL}
         PRAGMA application_id = {APPLICATION_ID};
         PRAGMA user_version = {SCHEMA_VERSION};"
    );
    conn.execute_batch(&sql).map_err(storage("creating the schema failed"))
}

/// Upgrades a version 1 file to version 2 under the write lock: adds the `bytes` column,
/// charges every record by the shared byte count, sums each user's usage, and adds the
/// triggers. One transaction, so a failure leaves version 1 as it was; it reads every record
/// once (see the module docs on how long that takes). Another process that upgraded first
/// leaves nothing to do.
fn upgrade(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(storage("upgrading the schema failed"))?;
    match inspect(&tx)? {
        Found::Ours(1) => upgrade_in(&tx)?,
        Found::Ours(version) => check(&tx, version)?,
        _ => return Err(foreign()),
    }
    tx.commit().map_err(storage("upgrading the schema failed"))
}

fn upgrade_in(conn: &Connection) -> Result<()> {
    let what = "upgrading the schema failed";
    let version_1 = &RECORD_COLUMNS[..RECORD_COLUMNS.len() - 1];
    if !same_columns(&columns(conn, "memory_records")?, version_1) {
        return Err(detected("the database schema does not match this release"));
    }
    conn.execute_batch(ADD_BYTES).map_err(storage(what))?;
    {
        let mut read = conn
            .prepare(
                "SELECT app_id, user_id, namespace, key, content, metadata, source_session,                  source_invocation, source_agent FROM memory_records",
            )
            .map_err(storage(what))?;
        let mut write = conn
            .prepare(
                "UPDATE memory_records SET bytes = ?5                  WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key = ?4",
            )
            .map_err(storage(what))?;
        let mut rows = read.query([]).map_err(storage(what))?;
        while let Some(row) = rows.next().map_err(storage(what))? {
            let text = |i: usize| row.get::<_, String>(i).map_err(storage(what));
            let optional = |i: usize| row.get::<_, Option<String>>(i).map_err(storage(what));
            let metadata: Metadata = serde_json::from_str(&text(5)?).map_err(|err| {
                crate::MemoryError::storage_from(super::error::PROVIDER, what, err)
            })?;
            let source = Source {
                session_id: optional(6)?,
                invocation_id: optional(7)?,
                agent: optional(8)?,
            };
            let (key, content) = (text(3)?, text(4)?);
            let bytes = crate::quota::record_bytes(&key, &content, &metadata, &source);
            write
                .execute(rusqlite::params![
                    text(0)?,
                    text(1)?,
                    text(2)?,
                    key,
                    i64::try_from(bytes).unwrap_or(i64::MAX)
                ])
                .map_err(storage(what))?;
        }
    }
    let sql = format!(
        "{CREATE_USAGE}
         INSERT INTO memory_usage (app_id, user_id, records, bytes)
             SELECT app_id, user_id, count(*), sum(bytes) FROM memory_records
             GROUP BY app_id, user_id;
         {CREATE_USAGE_TRIGGERS}
         PRAGMA user_version = {SCHEMA_VERSION};"
    );
    conn.execute_batch(&sql).map_err(storage(what))
}

/// Checks that a file marked as ours has the tables and columns this release expects.
fn check(conn: &Connection, version: i64) -> Result<()> {
    if version > SCHEMA_VERSION {
        return Err(detected("the database was written by a newer release of agent-memory"));
    }
    if version < SCHEMA_VERSION {
        // Version 1 is upgraded before this check; a lower number on a file carrying our id
        // is damage.
        return Err(detected("the database schema is not one this release knows"));
    }
    let mismatch = || detected("the database schema does not match this release");
    if !same_columns(&columns(conn, "memory_records")?, RECORD_COLUMNS)
        || !same_columns(&columns(conn, "memory_meta")?, META_COLUMNS)
        || !same_columns(&columns(conn, "memory_usage")?, USAGE_COLUMNS)
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
    let triggers: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name =              'memory_records' AND name IN (?1, ?2, ?3)",
            USAGE_TRIGGERS,
            |row| row.get(0),
        )
        .map_err(storage("checking the schema failed"))?;
    if triggers != 3 {
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
