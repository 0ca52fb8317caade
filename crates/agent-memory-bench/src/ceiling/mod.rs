//! The "physical limit": the same operation shapes on the same server with no library in
//! between, run right after the library's phases at the same concurrency so the ratio comes
//! from one run on one machine state.
//!
//! PostgreSQL runs `pgbench -M prepared` with our scripts (`ceilings/*.sql`) against a plain
//! table of the store's row shape holding the same 20,000 records. Redis runs
//! `redis-benchmark` with GET, SET, HSET and EVALSHA of `ceilings/cas.lua`, the shape of one
//! library write (read the revision, write content and the next revision), and of
//! `ceilings/page.lua`, the shape of one `list` or `search` page (an ordered index read, then
//! each record of the page, filtered by the query for search) over 2,000 scopes of 11 records
//! as the workload's are after `put_new`. The scripts are
//! compiled into the binary, so a run never depends on files outside the crate.
//!
//! SQLite runs the provider's statements on bare rusqlite connections, one per client thread
//! ([`sqlite`]).

use std::fmt;

use serde::Serialize;

use crate::target::pg_admin_url;
use crate::workload::Phase;

mod batched;
mod postgres;
mod redis;
pub mod sqlite;

pub use batched::TESTS as BATCHED_TESTS;
pub use postgres::{
    parse_pgbench, pg_checkpoint, pg_connect, pg_drop, pg_scripts, pg_settings, pg_settle,
    PgSession, PG_SCHEMA, PG_UPSERT,
};
use postgres::{pg_prepare, PG_TABLE};
pub use redis::{
    parse_redis_benchmark_csv, redis_connect, redis_settings, redis_settle, RedisSession,
    REDIS_CAS, REDIS_PAGE,
};
use redis::{redis_clean, redis_prepare};
use sqlite::SqliteSession;

/// What a ceiling step that failed says.
pub(crate) type Error = String;

/// One ceiling measurement.
#[derive(Debug, Clone, Serialize)]
pub struct CeilingResult {
    /// `pgbench`, `redis-benchmark` or `rusqlite`.
    pub tool: &'static str,
    /// The script or command: `get`, `put_new`, … for pgbench; `GET`, `SET`, `HSET`, `EVALSHA`.
    pub test: String,
    /// Clients (`-c`).
    pub concurrency: usize,
    /// Transactions or requests per second, as the tool reports them.
    pub ops_per_s: f64,
    /// Mean latency in microseconds, when the tool reports it.
    pub mean_us: Option<f64>,
    /// Median latency in microseconds, when the tool reports it.
    pub p50_us: Option<f64>,
    /// 99th percentile in microseconds, when the tool reports it.
    pub p99_us: Option<f64>,
    /// Transactions or requests done.
    pub ops: Option<u64>,
    /// The library phase this measurement ran right after.
    pub after_phase: Option<String>,
    /// Anything the reader should know (an exhausted delete pool, failed transactions).
    pub note: Option<String>,
}

/// Which ceiling test a library phase is compared with on each provider.
pub fn test_for(provider: &str, phase: Phase) -> Option<&'static str> {
    match (provider, phase) {
        ("postgres", Phase::PutNew) => Some("put_new"),
        ("postgres", Phase::Get) => Some("get"),
        ("postgres", Phase::PutUpdate) => Some("put_update"),
        ("postgres", Phase::List) => Some("list"),
        ("postgres", Phase::Delete) => Some("delete"),
        // Every library operation on Redis is one script call, so a script of the same shape
        // is the limit: a page read for list and search, the CAS write for the rest; plain
        // GET and SET are reported beside them for scale.
        ("redis", Phase::List) => Some("PAGE"),
        ("redis", Phase::Search) => Some("SEARCH"),
        ("redis", p) if Phase::STANDARD.contains(&p) => Some("EVALSHA"),
        ("sqlite", Phase::PutNew) => Some("put_new"),
        ("sqlite", Phase::Get) => Some("get"),
        ("sqlite", Phase::PutUpdate) => Some("put_update"),
        ("sqlite", Phase::List) => Some("list"),
        ("sqlite", Phase::Delete) => Some("delete"),
        _ => None,
    }
}

/// Settings for a ceiling run.
#[derive(Debug, Clone)]
pub struct CeilingOptions {
    /// pgbench `-T`, and the seconds of each SQLite ceiling test.
    pub pg_seconds: u64,
    /// Rows in the delete script's scratch pool (PostgreSQL and SQLite).
    pub pg_delete_pool: u64,
    /// redis-benchmark `-n`.
    pub redis_requests: u64,
    /// pgbench binary.
    pub pgbench: String,
    /// redis-benchmark binary.
    pub redis_benchmark: String,
}

impl Default for CeilingOptions {
    fn default() -> Self {
        Self {
            pg_seconds: 15,
            pg_delete_pool: 1_000_000,
            redis_requests: 100_000,
            pgbench: "pgbench".to_owned(),
            redis_benchmark: "redis-benchmark".to_owned(),
        }
    }
}

/// What every ceiling test at one concurrency level runs with: the clients, the settings, and
/// where progress is logged.
#[derive(Clone, Copy)]
pub struct Level<'a> {
    /// Clients (`-c`), as many as the library phase has callers.
    pub concurrency: usize,
    /// The ceiling's settings.
    pub options: &'a CeilingOptions,
    /// Where progress lines go.
    pub log: &'a (dyn Fn(&str) + Sync),
}

impl fmt::Debug for Level<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Level").field("concurrency", &self.concurrency).finish_non_exhaustive()
    }
}

/// A ceiling prepared on one server for one concurrency level: tests run one at a time, each
/// right after the library phase it is compared with, so drift in the machine's load (or in
/// the disk's flush latency) hits both sides of a ratio alike.
#[derive(Debug)]
pub enum Session {
    /// pgbench against the ceiling tables.
    Postgres(PgSession),
    /// redis-benchmark against the ceiling keys.
    Redis(RedisSession),
    /// Bare rusqlite connections to a scratch database beside the store's file.
    Sqlite(SqliteSession),
}

impl Session {
    /// Loads the ceiling's data next to the store's: for PostgreSQL the two tables (the
    /// caller settles the server afterwards, together with the library's preload); for Redis
    /// the strings and hashes, and the script. `None` for providers without a ceiling.
    ///
    /// # Errors
    /// When the server cannot be reached or the load fails.
    pub async fn prepare(
        provider: &str,
        url: &str,
        options: &CeilingOptions,
        log: &(dyn Fn(&str) + Sync),
    ) -> Result<Option<Session>, Error> {
        match provider {
            "postgres" => {
                let client = pg_connect(url).await?;
                log(&format!(
                    "ceiling: loading {PG_TABLE} and a delete pool of {} rows",
                    options.pg_delete_pool
                ));
                pg_prepare(&client, options.pg_delete_pool).await?;
                let scripts =
                    tempfile::tempdir().map_err(|err| format!("creating a temp dir: {err}"))?;
                for (test, script) in pg_scripts() {
                    std::fs::write(scripts.path().join(format!("{test}.sql")), script)
                        .map_err(|err| format!("writing {test}.sql: {err}"))?;
                }
                log("ceiling: the provider's own table for the batched ceiling");
                let batched = match batched::prepare(url, &client, options.pg_delete_pool).await {
                    Ok(sql) => Some(sql),
                    Err(err) => {
                        log(&format!("batched ceiling unavailable: {err}"));
                        None
                    }
                };
                Ok(Some(Session::Postgres(PgSession {
                    client,
                    batched,
                    conninfo: pg_admin_url(url)?,
                    scripts,
                    url: url.to_owned(),
                })))
            }
            "redis" => Ok(Some(Session::Redis(redis_prepare(url, log).await?))),
            "sqlite" => {
                log(&format!(
                    "ceiling: loading a scratch SQLite database and a delete pool of {} rows",
                    options.pg_delete_pool
                ));
                let pool = options.pg_delete_pool;
                let session = tokio::task::block_in_place(|| SqliteSession::prepare(url, pool))?;
                Ok(Some(Session::Sqlite(session)))
            }
            _ => Ok(None),
        }
    }

    /// Runs one test at the level's clients.
    ///
    /// # Errors
    /// When the tool cannot run or rejects the test.
    pub async fn run(&mut self, test: &str, level: Level<'_>) -> Result<CeilingResult, Error> {
        match self {
            Session::Postgres(pg) => pg.run(test, level).await,
            Session::Redis(r) => r.run(test, level).await,
            Session::Sqlite(s) => {
                let Level { concurrency, options, log } = level;
                log(&format!(
                    "ceiling: rusqlite {test} on {concurrency} threads for {}s",
                    options.pg_seconds
                ));
                tokio::task::block_in_place(|| s.run(test, concurrency, options.pg_seconds))
            }
        }
    }

    /// The PostgreSQL session, for its batched ceiling; `None` on other providers.
    pub fn postgres(&mut self) -> Option<&mut PgSession> {
        match self {
            Session::Postgres(pg) => Some(pg),
            _ => None,
        }
    }

    /// The tests measured once at the end for context (Redis: plain GET, SET, HSET).
    pub fn context_tests(&self) -> &'static [&'static str] {
        match self {
            Session::Postgres(_) | Session::Sqlite(_) => &[],
            Session::Redis(_) => &["GET", "SET", "HSET"],
        }
    }

    /// Removes the ceiling's tables or keys.
    ///
    /// # Errors
    /// When the cleanup fails.
    pub async fn finish(self) -> Result<(), Error> {
        match self {
            Session::Postgres(pg) => {
                batched::drop_schema(&pg.client).await?;
                drop(pg.client);
                pg_drop(&pg.url).await
            }
            Session::Redis(mut r) => redis_clean(&mut r.con).await,
            // Dropping the session removes its files.
            Session::Sqlite(s) => {
                drop(s);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pgbench_output() {
        let text = "transaction type: get.sql\nnumber of clients: 16\n\
            number of transactions actually processed: 123456\n\
            number of failed transactions: 0 (0.000%)\nlatency average = 0.812 ms\n\
            initial connection time = 12.3 ms\ntps = 19702.123456 (without initial connection time)\n";
        let r = parse_pgbench(text, 16).expect("parses");
        assert!((r.ops_per_s - 19_702.123_456).abs() < 1e-6);
        assert_eq!(r.ops, Some(123_456));
        assert!(r.note.is_none());
        assert!((r.mean_us.expect("mean") - 812.0).abs() < 1e-6);
    }

    #[test]
    fn reads_redis_benchmark_csv() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
            \"EVALSHA abc 1 k:__rand_int__ * some words here\",\"51020.41\",\"0.290\",\"0.080\",\"0.279\",\"0.399\",\"0.551\",\"1.927\"\n";
        let r = parse_redis_benchmark_csv(text).expect("parses");
        assert!((r.ops_per_s - 51_020.41).abs() < 1e-6);
        assert!((r.p50_us.expect("p50") - 279.0).abs() < 1e-6);
        assert!((r.p99_us.expect("p99") - 551.0).abs() < 1e-6);
    }

    #[test]
    fn the_put_scripts_end_with_the_upsert_of_their_key() {
        for (test, script) in pg_scripts() {
            assert!(!script.contains("{key}"), "{test}");
            let upsert = script.find("INSERT INTO bench_ceiling_records");
            assert_eq!(upsert.is_some(), test.starts_with("put_"), "{test}");
        }
        let scripts = pg_scripts();
        assert!(scripts[0].1.contains("\n        'n' || lpad(:id::text, 8, '0'),\n"));
        assert!(scripts[2].1.contains("\n        'k' || lpad(:k::text, 4, '0'),\n"));
        assert!(scripts[2].1.ends_with("RETURNING revision, created_at, updated_at;\n"));
    }

    #[test]
    fn every_standard_phase_has_a_ceiling_on_every_stored_provider() {
        for phase in Phase::STANDARD {
            assert!(test_for("postgres", phase).is_some());
            assert!(test_for("redis", phase).is_some());
            assert!(test_for("sqlite", phase).is_some());
        }
        assert!(test_for("memory", Phase::Get).is_none());
    }
}
