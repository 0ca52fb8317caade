//! The SQLite ceiling: the provider's schema, connection pragmas and statements on bare
//! rusqlite connections, with no library and no thread hop. Each of C threads owns one
//! connection to a scratch database beside the store's file (WAL mode, as the provider's),
//! and runs one operation after another for the time budget; a write is its own
//! `BEGIN IMMEDIATE` … `COMMIT` (the provider may group concurrent writes into one commit,
//! which this ceiling does not do).
//!
//! The schema is the provider's own ([`SCHEMA_SQL`]); the statements below are copied from
//! `agent_memory::sqlite` (they are internal), each constant naming the one it mirrors.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::sqlite::SCHEMA_SQL;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Statement};

use crate::ceiling::CeilingResult;
use crate::workload;

type Error = String;

/// `schema.rs` `connect`: the per-connection pragmas at the provider's defaults
/// (`synchronous = NORMAL`, 16 MiB page cache, 1 GiB memory map, `secure_delete` on writers).
pub const PRAGMAS: &str = "PRAGMA synchronous = NORMAL; PRAGMA cache_size = -16384; \
     PRAGMA mmap_size = 1073741824; PRAGMA secure_delete = ON;";

/// `statements.rs` `put`: the row at the key, live or expired.
pub const PUT_HELD: &str = "SELECT revision, created_at, bytes, \
     (expires_at IS NULL OR expires_at > ?5) FROM memory_records \
     WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key = ?4";
/// `statements.rs` `put`: the next revision.
pub const PUT_REVISION: &str =
    "UPDATE memory_meta SET value = value + 1 WHERE name = ?1 RETURNING value";
/// `statements.rs` `put`: the upsert.
pub const PUT_UPSERT: &str = "INSERT INTO memory_records (app_id, user_id, namespace, key, \
     content, metadata, source_session, source_invocation, source_agent, revision, created_at, \
     updated_at, expires_at, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, \
     ?13, ?14) ON CONFLICT (app_id, user_id, namespace, key) DO UPDATE SET \
     content = excluded.content, metadata = excluded.metadata, \
     source_session = excluded.source_session, \
     source_invocation = excluded.source_invocation, source_agent = excluded.source_agent, \
     revision = excluded.revision, created_at = excluded.created_at, \
     updated_at = excluded.updated_at, expires_at = excluded.expires_at, bytes = excluded.bytes";
/// `statements.rs` `get`.
pub const GET: &str = "SELECT key, content, metadata, revision, created_at, updated_at, \
     expires_at, source_session, source_invocation, source_agent FROM memory_records \
     WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key = ?4 \
     AND (expires_at IS NULL OR expires_at > ?5)";
/// `statements.rs` `list` without a cursor or prefix end (`list_sql!("key >= ?4")`); the
/// caller stops after `limit + 1` rows as the provider does.
pub const LIST: &str = "SELECT key, content, metadata, revision, created_at, updated_at, \
     expires_at, source_session, source_invocation, source_agent FROM memory_records \
     WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key >= ?4 \
     AND (expires_at IS NULL OR expires_at > ?5) ORDER BY key";
/// `statements.rs` `delete` without an expected revision.
pub const DELETE: &str = "DELETE FROM memory_records \
     WHERE app_id = ?1 AND user_id = ?2 AND namespace = ?3 AND key = ?4 \
     RETURNING (expires_at IS NULL OR expires_at > ?5)";

/// The tests, in the order of the phases they follow.
pub const TESTS: [&str; 5] = ["put_new", "get", "put_update", "list", "delete"];

/// The namespace of the delete pool's rows.
const SCRATCH: &str = "scratch";

/// The file path a `sqlite:` store URL names.
///
/// # Errors
/// When the URL names no file.
pub fn store_path(url: &str) -> Result<PathBuf, Error> {
    let rest = url.split_once(':').map_or("", |(_, rest)| rest);
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let path = rest.split('?').next().unwrap_or("");
    if path.is_empty() {
        return Err("the sqlite store URL names no file".to_owned());
    }
    Ok(PathBuf::from(path))
}

/// The scratch database of one concurrency level, removed (with its WAL) on drop.
#[derive(Debug)]
pub struct SqliteSession {
    path: PathBuf,
    /// Keys handed to `put_new` so far, so every run inserts fresh ones.
    next_new: u64,
    /// Delete-pool rows not yet deleted: `[next_delete, pool)`.
    next_delete: u64,
    pool: u64,
}

fn sql_err(what: &str) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |err| format!("{what}: {err}")
}

fn open(path: &Path) -> Result<Connection, Error> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql_err("opening the ceiling database"))?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(sql_err("busy_timeout"))?;
    conn.set_prepared_statement_cache_capacity(32);
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(sql_err("enabling QPSG"))?;
    conn.execute_batch(PRAGMAS).map_err(sql_err("setting the pragmas"))?;
    Ok(conn)
}

/// The scope of preloaded record `i`: the workload's users and namespaces.
fn scope_of(i: u64) -> (String, &'static str) {
    let i = usize::try_from(i).unwrap_or(0);
    let per_user = workload::NAMESPACES.len() * workload::KEYS_PER_NS;
    let user = (i / per_user) % workload::N_USERS;
    let ns = workload::NAMESPACES[(i / workload::KEYS_PER_NS) % workload::NAMESPACES.len()];
    (workload::user_id(user), ns)
}

fn upsert(
    conn: &Connection,
    user: &str,
    ns: &str,
    key: &str,
    content: &str,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let held: Option<(i64, i64, i64, bool)> = conn
        .prepare_cached(PUT_HELD)?
        .query_row(params![workload::APP, user, ns, key, now], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?;
    let created_at = held.filter(|h| h.3).map_or(now, |h| h.1);
    let revision: i64 =
        conn.prepare_cached(PUT_REVISION)?.query_row(["last_revision"], |row| row.get(0))?;
    write(
        &mut *conn.prepare_cached(PUT_UPSERT)?,
        user,
        ns,
        key,
        content,
        (revision, created_at, now),
    )?;
    conn.execute_batch("COMMIT")
}

/// Runs `PUT_UPSERT` for one of the workload's records at `(revision, created_at,
/// updated_at)`: no metadata, source or expiry, and the byte count the provider charges.
fn write(
    upsert: &mut Statement<'_>,
    user: &str,
    ns: &str,
    key: &str,
    content: &str,
    (revision, created_at, updated_at): (i64, i64, i64),
) -> rusqlite::Result<usize> {
    let bytes = i64::try_from(key.len() + content.len() + 2).unwrap_or(0);
    upsert.execute(params![
        workload::APP,
        user,
        ns,
        key,
        content,
        "{}",
        None::<&str>,
        None::<&str>,
        None::<&str>,
        revision,
        created_at,
        updated_at,
        None::<i64>,
        bytes
    ])
}

fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

impl SqliteSession {
    /// Creates the scratch database beside the store's file, loads the workload's 20,000
    /// records and a delete pool of `pool` rows, and checkpoints it.
    ///
    /// # Errors
    /// When the file cannot be created or loaded.
    pub fn prepare(url: &str, pool: u64) -> Result<Self, Error> {
        let store = store_path(url)?;
        let dir = store.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let path = dir.join(format!(".bench-ceiling-{}.db", std::process::id()));
        remove_files(&path);
        let mut conn = open(&path)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(sql_err("WAL mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("the ceiling database refused WAL mode ({mode})"));
        }
        conn.execute_batch(SCHEMA_SQL).map_err(sql_err("creating the ceiling schema"))?;
        let now = now_micros();
        let tx = conn.transaction().map_err(sql_err("loading"))?;
        {
            let mut stmt = tx.prepare(PUT_UPSERT).map_err(sql_err("loading"))?;
            let preload = workload::preload();
            let rows = preload
                .iter()
                .map(|op| {
                    (workload::user_id(op.user), op.namespace(), op.key.clone(), op.content_index)
                })
                .chain((0..pool).map(|i| {
                    (
                        workload::user_id(usize::try_from(i % 1000).unwrap_or(0)),
                        SCRATCH,
                        format!("d{i:08}"),
                        1,
                    )
                }));
            for (revision, (user, ns, key, content)) in rows.enumerate() {
                let text = workload::content(content);
                let rev = i64::try_from(revision).unwrap_or(0) + 1;
                write(&mut stmt, &user, ns, &key, &text, (rev, now, now))
                    .map_err(sql_err("loading"))?;
            }
        }
        tx.commit().map_err(sql_err("loading"))?;
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); ANALYZE;")
            .map_err(sql_err("checkpointing"))?;
        Ok(Self { path, next_new: 0, next_delete: 0, pool })
    }

    /// Runs `test` on `concurrency` threads, each with its own connection, for `seconds`.
    ///
    /// # Errors
    /// For an unknown test or a failing statement.
    pub fn run(
        &mut self,
        test: &str,
        concurrency: usize,
        seconds: u64,
    ) -> Result<CeilingResult, Error> {
        if !TESTS.contains(&test) {
            return Err(format!("no sqlite ceiling test {test}"));
        }
        let conns =
            (0..concurrency.max(1)).map(|_| open(&self.path)).collect::<Result<Vec<_>, _>>()?;
        let budget = Duration::from_secs(seconds.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let exhausted = Arc::new(AtomicBool::new(false));
        // Shared counters hand out fresh keys (put_new) and pool rows (delete) once each.
        let new_counter = Arc::new(AtomicU64::new(self.next_new));
        let del_counter = Arc::new(AtomicU64::new(self.next_delete));
        let pool = self.pool;
        let started = Instant::now();
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(t, conn)| {
                let (stop, exhausted) = (Arc::clone(&stop), Arc::clone(&exhausted));
                let (new_counter, del_counter) =
                    (Arc::clone(&new_counter), Arc::clone(&del_counter));
                let test = test.to_owned();
                std::thread::spawn(move || -> Result<Vec<u64>, Error> {
                    let mut latencies = Vec::new();
                    let mut rng = workload::SplitMix64::new(7 + t as u64);
                    let content = workload::content(workload::Contents::PutUpdate.index(0));
                    while started.elapsed() < budget && !stop.load(Ordering::Relaxed) {
                        let n = workload::N_PRELOAD as u64;
                        let op_start = Instant::now();
                        let now = now_micros();
                        let result = match test.as_str() {
                            "put_new" => {
                                let i = new_counter.fetch_add(1, Ordering::Relaxed);
                                let (user, ns) = scope_of(i % n);
                                upsert(&conn, &user, ns, &format!("new{i:09}"), &content, now)
                            }
                            "put_update" => {
                                let i = rng.next_u64() % n;
                                let (user, ns) = scope_of(i);
                                let key = format!("k{:04}", i % workload::KEYS_PER_NS as u64);
                                upsert(&conn, &user, ns, &key, &content, now)
                            }
                            "get" => {
                                let i = rng.next_u64() % n;
                                let (user, ns) = scope_of(i);
                                let key = format!("k{:04}", i % workload::KEYS_PER_NS as u64);
                                read_rows(&conn, GET, &user, ns, &key, now, 1)
                            }
                            "list" => {
                                let i = rng.next_u64() % n;
                                let (user, ns) = scope_of(i);
                                read_rows(&conn, LIST, &user, ns, "", now, workload::LIST_LIMIT + 1)
                            }
                            _ => {
                                let i = del_counter.fetch_add(1, Ordering::Relaxed);
                                if i >= pool {
                                    exhausted.store(true, Ordering::Relaxed);
                                    break;
                                }
                                let user =
                                    workload::user_id(usize::try_from(i % 1000).unwrap_or(0));
                                delete(&conn, &user, &format!("d{i:08}"), now)
                            }
                        };
                        result.map_err(sql_err("ceiling statement"))?;
                        latencies
                            .push(u64::try_from(op_start.elapsed().as_nanos()).unwrap_or(u64::MAX));
                    }
                    Ok(latencies)
                })
            })
            .collect();
        let mut latencies = Vec::new();
        let mut failure = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(l)) => latencies.extend(l),
                Ok(Err(err)) => {
                    stop.store(true, Ordering::Relaxed);
                    failure = Some(err);
                }
                Err(_) => failure = Some("a ceiling thread panicked".to_owned()),
            }
        }
        let elapsed = started.elapsed().as_secs_f64();
        self.next_new = new_counter.load(Ordering::Relaxed);
        self.next_delete = del_counter.load(Ordering::Relaxed).min(self.pool);
        if let Some(err) = failure {
            return Err(err);
        }
        latencies.sort_unstable();
        let ops = latencies.len() as u64;
        let pct = |p: usize| {
            latencies
                .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
                .map(|ns| *ns as f64 / 1_000.0)
        };
        let mean = (ops > 0).then(|| latencies.iter().sum::<u64>() as f64 / ops as f64 / 1_000.0);
        Ok(CeilingResult {
            tool: "rusqlite",
            test: test.to_owned(),
            concurrency,
            ops_per_s: if elapsed > 0.0 { ops as f64 / elapsed } else { 0.0 },
            mean_us: mean,
            p50_us: pct(50),
            p99_us: pct(99),
            ops: Some(ops),
            after_phase: None,
            note: exhausted
                .load(Ordering::Relaxed)
                .then(|| format!("the delete pool of {} rows ran out", self.pool)),
        })
    }
}

fn read_rows(
    conn: &Connection,
    sql: &str,
    user: &str,
    ns: &str,
    key: &str,
    now: i64,
    most: usize,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params![workload::APP, user, ns, key, now])?;
    let mut seen = 0;
    while seen < most {
        let Some(row) = rows.next()? else { break };
        // Touch the content as decoding would.
        let content = row.get_ref(1)?.as_str().map_err(rusqlite::Error::from)?;
        std::hint::black_box(content.len());
        seen += 1;
    }
    Ok(())
}

fn delete(conn: &Connection, user: &str, key: &str, now: i64) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let removed: Option<bool> = conn
        .prepare_cached(DELETE)?
        .query_row(params![workload::APP, user, SCRATCH, key, now], |row| row.get(0))
        .optional()?;
    std::hint::black_box(removed);
    conn.execute_batch("COMMIT")
}

fn remove_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

impl Drop for SqliteSession {
    fn drop(&mut self) {
        remove_files(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_store_path() {
        assert_eq!(store_path("sqlite:/tmp/a.db"), Ok(PathBuf::from("/tmp/a.db")));
        assert_eq!(store_path("sqlite:///tmp/a.db?mode=rwc"), Ok(PathBuf::from("/tmp/a.db")));
        assert!(store_path("sqlite:").is_err());
    }

    #[test]
    fn runs_every_test_beside_the_store() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite:{}", dir.path().join("store.db").display());
        let mut session = SqliteSession::prepare(&url, 500).expect("prepares");
        for test in TESTS {
            let r = session.run(test, 2, 1).expect("runs");
            assert!(r.ops_per_s > 0.0, "{test}");
        }
        drop(session);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0, "cleaned up");
    }
}
