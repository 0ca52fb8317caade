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
//! ([`crate::sqlite_ceiling`]).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::sqlite_ceiling::SqliteSession;
use crate::target::{pg_admin_url, redis_admin_url, redis_parts, redis_tls_files, RedisTlsFiles};
use crate::workload::{self, Phase};

/// The table and the scripts, as shipped in `ceilings/`.
pub const PG_SCHEMA: &str = include_str!("../ceilings/schema.sql");
/// `get`: one row by primary key.
pub const PG_GET: &str = include_str!("../ceilings/get.sql");
/// `list`: first page of 20 by key.
pub const PG_LIST: &str = include_str!("../ceilings/list.sql");
/// `put_new`: upsert of a fresh key.
pub const PG_PUT_NEW: &str = include_str!("../ceilings/put_new.sql");
/// `put_update`: upsert of an existing key.
pub const PG_PUT_UPDATE: &str = include_str!("../ceilings/put_update.sql");
/// `delete`: delete of an existing row.
pub const PG_DELETE: &str = include_str!("../ceilings/delete.sql");
/// The Redis compare-and-set script.
pub const REDIS_CAS: &str = include_str!("../ceilings/cas.lua");
/// The Redis page script: a page of a scope's records, filtered by a query for search.
pub const REDIS_PAGE: &str = include_str!("../ceilings/page.lua");

const PG_TABLE: &str = "bench_ceiling_records";
const PG_TABLE_DEL: &str = "bench_ceiling_records_del";
const REDIS_PREFIX: &str = "bench-ceiling:";
/// `redis-benchmark -r`: random key numbers are drawn below this, and printed in 12 digits.
const REDIS_KEYSPACE: usize = 20_000;
/// Scopes (user × namespace) of the page ceiling, as in the workload.
const REDIS_PAGE_SCOPES: usize = 2_000;
/// Records per scope of the page ceiling: the workload's 10 preloaded ones and about one
/// `put_new` record each.
const REDIS_PAGE_RECORDS: usize = 11;

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
            pg_delete_pool: 400_000,
            redis_requests: 100_000,
            pgbench: "pgbench".to_owned(),
            redis_benchmark: "redis-benchmark".to_owned(),
        }
    }
}

type Error = String;

fn pg_err(what: &str) -> impl Fn(tokio_postgres::Error) -> Error + '_ {
    move |err| format!("{what}: {}", crate::runner::describe(&err))
}

/// A plain tokio-postgres connection for setup statements.
///
/// # Errors
/// When the server cannot be reached.
pub async fn pg_connect(url: &str) -> Result<tokio_postgres::Client, Error> {
    let admin = pg_admin_url(url)?;
    let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .map_err(pg_err("connecting to postgres"))?;
    tokio::spawn(async move {
        // The connection ends when the client is dropped; its error then is not interesting.
        let _ = connection.await;
    });
    Ok(client)
}

/// `VACUUM (ANALYZE)` of the whole database and a `CHECKPOINT`, after a preload, so every
/// concurrency level starts from the same settled state (WORKLOAD.md's execution model). The
/// whole database because the provider's table names are its own business.
///
/// # Errors
/// When a statement fails.
pub async fn pg_settle(url: &str) -> Result<(), Error> {
    let client = pg_connect(url).await?;
    client.batch_execute("VACUUM (ANALYZE)").await.map_err(pg_err("VACUUM (ANALYZE)"))?;
    client.batch_execute("CHECKPOINT").await.map_err(pg_err("CHECKPOINT"))?;
    Ok(())
}

/// The server settings WORKLOAD.md pins, as the server reports them.
///
/// # Errors
/// When the server cannot be reached.
pub async fn pg_settings(url: &str) -> Result<Vec<(String, String)>, Error> {
    let client = pg_connect(url).await?;
    let mut out = Vec::new();
    for name in ["server_version", "synchronous_commit", "fsync", "shared_buffers"] {
        let row = client
            .query_one(&format!("SHOW {name}"), &[])
            .await
            .map_err(pg_err("reading settings"))?;
        out.push((name.to_owned(), row.get::<_, String>(0)));
    }
    Ok(out)
}

/// Creates the ceiling tables, loads the preload (and the delete pool) and settles the server.
async fn pg_prepare(client: &tokio_postgres::Client, delete_pool: u64) -> Result<(), Error> {
    client.batch_execute(PG_SCHEMA).await.map_err(pg_err("creating the ceiling tables"))?;
    let preload = workload::preload();
    let mut users = Vec::with_capacity(preload.len());
    let mut namespaces = Vec::with_capacity(preload.len());
    let mut keys = Vec::with_capacity(preload.len());
    let mut contents = Vec::with_capacity(preload.len());
    let mut metadata = Vec::with_capacity(preload.len());
    for op in &preload {
        users.push(workload::user_id(op.user));
        namespaces.push(op.namespace().to_owned());
        keys.push(op.key.clone());
        contents.push(workload::content(op.content_index));
        metadata.push(op.metadata().to_string());
    }
    client
        .execute(
            &format!(
                "INSERT INTO {PG_TABLE} (app, user_id, namespace, key, content, metadata) \
                 SELECT 'bench-app', u, n, k, c, m::jsonb \
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) \
                 AS t(u, n, k, c, m)"
            ),
            &[&users, &namespaces, &keys, &contents, &metadata],
        )
        .await
        .map_err(pg_err("loading the ceiling preload"))?;
    let last = i64::try_from(delete_pool).unwrap_or(i64::MAX).saturating_sub(1);
    client
        .batch_execute(&format!("INSERT INTO {PG_TABLE_DEL} SELECT * FROM {PG_TABLE}"))
        .await
        .map_err(pg_err("copying the preload"))?;
    client
        .execute(
            &format!(
                "INSERT INTO {PG_TABLE_DEL} (app, user_id, namespace, key, content, metadata) \
                 SELECT 'bench-app', 'u' || lpad((i % 1000)::text, 4, '0'), 'scratch', \
                        'd' || lpad(i::text, 8, '0'), $1, '{{\"category\": \"scratch\"}}' \
                 FROM generate_series(0::bigint, $2::bigint) AS i"
            ),
            &[&workload::content(1), &last],
        )
        .await
        .map_err(pg_err("loading the delete pool"))?;
    // Separate calls: VACUUM refuses to run inside the implicit transaction of a
    // multi-statement batch.
    client
        .batch_execute(&format!("VACUUM (ANALYZE) {PG_TABLE}, {PG_TABLE_DEL}"))
        .await
        .map_err(pg_err("VACUUM (ANALYZE) of the ceiling tables"))?;
    client.batch_execute("CHECKPOINT").await.map_err(pg_err("CHECKPOINT"))?;
    Ok(())
}

async fn pg_count_pool(client: &tokio_postgres::Client) -> Result<i64, Error> {
    let row = client
        .query_one(&format!("SELECT count(*) FROM {PG_TABLE_DEL} WHERE namespace = 'scratch'"), &[])
        .await
        .map_err(pg_err("counting the delete pool"))?;
    Ok(row.get(0))
}

/// Drops the ceiling tables.
///
/// # Errors
/// When the statement fails.
pub async fn pg_drop(url: &str) -> Result<(), Error> {
    let client = pg_connect(url).await?;
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {PG_TABLE}, {PG_TABLE_DEL}"))
        .await
        .map_err(pg_err("dropping the ceiling tables"))
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

/// The PostgreSQL side of a [`Session`].
#[derive(Debug)]
pub struct PgSession {
    client: tokio_postgres::Client,
    conninfo: String,
    scripts: tempfile::TempDir,
    url: String,
}

/// The Redis side of a [`Session`].
pub struct RedisSession {
    con: redis::aio::MultiplexedConnection,
    sha: String,
    page_sha: String,
    parts: crate::target::RedisParts,
}

impl std::fmt::Debug for RedisSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The parts hold the password.
        f.debug_struct("RedisSession").field("sha", &self.sha).finish_non_exhaustive()
    }
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
                for (test, script) in [
                    ("put_new", PG_PUT_NEW),
                    ("get", PG_GET),
                    ("put_update", PG_PUT_UPDATE),
                    ("list", PG_LIST),
                    ("delete", PG_DELETE),
                ] {
                    std::fs::write(scripts.path().join(format!("{test}.sql")), script)
                        .map_err(|err| format!("writing {test}.sql: {err}"))?;
                }
                Ok(Some(Session::Postgres(PgSession {
                    client,
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

    /// Runs one test at `concurrency` clients.
    ///
    /// # Errors
    /// When the tool cannot run or rejects the test.
    pub async fn run(
        &mut self,
        test: &str,
        concurrency: usize,
        options: &CeilingOptions,
        log: &(dyn Fn(&str) + Sync),
    ) -> Result<CeilingResult, Error> {
        match self {
            Session::Postgres(pg) => pg.run(test, concurrency, options, log).await,
            Session::Redis(r) => r.run(test, concurrency, options, log).await,
            Session::Sqlite(s) => {
                log(&format!(
                    "ceiling: rusqlite {test} on {concurrency} threads for {}s",
                    options.pg_seconds
                ));
                tokio::task::block_in_place(|| s.run(test, concurrency, options.pg_seconds))
            }
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

impl PgSession {
    async fn run(
        &mut self,
        test: &str,
        concurrency: usize,
        options: &CeilingOptions,
        log: &(dyn Fn(&str) + Sync),
    ) -> Result<CeilingResult, Error> {
        let path = self.scripts.path().join(format!("{test}.sql"));
        if !path.exists() {
            return Err(format!("no pgbench script for {test}"));
        }
        // Same starting point as the library phase before it: a fresh checkpoint, so both
        // pay the same full-page writes.
        self.client.batch_execute("CHECKPOINT").await.map_err(pg_err("CHECKPOINT"))?;
        let pool_before =
            if test == "delete" { Some(pg_count_pool(&self.client).await?) } else { None };
        log(&format!("ceiling: pgbench {test} -c {concurrency} -T {}", options.pg_seconds));
        let mut result =
            pgbench(&options.pgbench, &self.conninfo, &path, concurrency, options.pg_seconds)
                .await
                .map_err(|err| format!("pgbench {test}: {err}"))?;
        result.test = test.to_owned();
        if let Some(before) = pool_before {
            let after = pg_count_pool(&self.client).await?;
            let removed = u64::try_from(before - after).unwrap_or(0);
            if let Some(done) = result.ops {
                if removed < done {
                    result.note = Some(format!(
                        "delete pool exhausted: {removed} of {done} deletes hit a row; raise \
                         --ceiling-delete-pool"
                    ));
                }
            }
        }
        Ok(result)
    }
}

/// Issues `CHECKPOINT`, so a library phase starts from the same state its ceiling does.
///
/// # Errors
/// When the statement fails.
pub async fn pg_checkpoint(url: &str) -> Result<(), Error> {
    let client = pg_connect(url).await?;
    client.batch_execute("CHECKPOINT").await.map_err(pg_err("CHECKPOINT"))
}

async fn pgbench(
    binary: &str,
    conninfo: &str,
    script: &Path,
    concurrency: usize,
    seconds: u64,
) -> Result<CeilingResult, Error> {
    let threads = concurrency.clamp(1, 2);
    let output = tokio::process::Command::new(binary)
        .arg("-n")
        .args(["-M", "prepared"])
        .args(["-c", &concurrency.to_string()])
        .args(["-j", &threads.to_string()])
        .args(["-T", &seconds.to_string()])
        .args(["-D", "seq=0"])
        .args(["-D", &format!("nc={concurrency}")])
        .arg("-f")
        .arg(script)
        .arg(conninfo)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|err| format!("could not run {binary}: {err}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("exited with {}: {}", output.status, stderr.trim()));
    }
    parse_pgbench(&stdout, concurrency)
}

/// Reads `tps = …`, `latency average = … ms`, the processed and failed transaction counts.
///
/// # Errors
/// When no `tps` line is present.
pub fn parse_pgbench(stdout: &str, concurrency: usize) -> Result<CeilingResult, Error> {
    let mut tps = None;
    let mut mean_us = None;
    let mut ops = None;
    let mut failed = None;
    for line in stdout.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("tps = ") {
            tps = rest.split_whitespace().next().and_then(|v| v.parse::<f64>().ok());
        } else if let Some(rest) = line.strip_prefix("latency average = ") {
            mean_us = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .map(|ms| ms * 1_000.0);
        } else if let Some(rest) = line.strip_prefix("number of transactions actually processed: ")
        {
            ops = rest.split(['/', ' ']).next().and_then(|v| v.parse::<u64>().ok());
        } else if let Some(rest) = line.strip_prefix("number of failed transactions: ") {
            failed = rest.split_whitespace().next().and_then(|v| v.parse::<u64>().ok());
        }
    }
    let ops_per_s = tps.ok_or_else(|| format!("no tps line in pgbench output: {stdout}"))?;
    Ok(CeilingResult {
        tool: "pgbench",
        test: String::new(),
        concurrency,
        ops_per_s,
        mean_us,
        p50_us: None,
        p99_us: None,
        ops,
        after_phase: None,
        note: failed.filter(|&n| n > 0).map(|n| format!("{n} failed transactions")),
    })
}

fn redis_err(what: &str) -> impl Fn(redis::RedisError) -> Error + '_ {
    move |err| format!("{what}: {}", crate::runner::describe(&err))
}

/// A plain connection for setup commands.
///
/// # Errors
/// When the server cannot be reached.
pub async fn redis_connect(url: &str) -> Result<redis::aio::MultiplexedConnection, Error> {
    let admin = redis_admin_url(url)?;
    let files = redis_tls_files(url)?;
    let client = if files == RedisTlsFiles::default() {
        redis::Client::open(admin.as_str()).map_err(redis_err("parsing the redis url"))?
    } else {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let read = |path: &Option<String>| -> Result<Option<Vec<u8>>, Error> {
            path.as_ref()
                .map(|p| std::fs::read(p).map_err(|err| format!("reading {p}: {err}")))
                .transpose()
        };
        let client_tls = match (read(&files.cert)?, read(&files.key)?) {
            (Some(client_cert), Some(client_key)) => {
                Some(redis::ClientTlsConfig { client_cert, client_key })
            }
            _ => None,
        };
        let certs = redis::TlsCertificates { client_tls, root_cert: read(&files.cacert)? };
        redis::Client::build_with_tls(admin.as_str(), certs)
            .map_err(redis_err("parsing the redis url"))?
    };
    client.get_multiplexed_async_connection().await.map_err(redis_err("connecting to redis"))
}

/// The persistence settings WORKLOAD.md pins, as the server reports them.
///
/// # Errors
/// When the server cannot be reached.
pub async fn redis_settings(url: &str) -> Result<Vec<(String, String)>, Error> {
    let mut con = redis_connect(url).await?;
    let mut out = Vec::new();
    for name in ["appendonly", "appendfsync", "save", "maxmemory-policy"] {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(&mut con)
            .await
            .map_err(redis_err("reading settings"))?;
        out.push((name.to_owned(), pair.get(1).cloned().unwrap_or_default()));
    }
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut con)
        .await
        .map_err(redis_err("reading INFO"))?;
    if let Some(version) = info_field(&info, "redis_version") {
        out.insert(0, ("redis_version".to_owned(), version.to_owned()));
    }
    Ok(out)
}

/// Longest wait for an append-only-file rewrite to finish.
const AOF_REWRITE_TIMEOUT: Duration = Duration::from_secs(600);

/// Rewrites the append-only file after a preload and waits until the rewrite is done, so that
/// no phase shares the machine with a rewrite the load provoked: a rewrite forks the server and
/// copies its whole dataset, and Redis starts one by itself whenever the file has doubled,
/// which the scale mode's 2,000,000 records make happen at unpredictable moments. This is
/// Redis's counterpart of PostgreSQL's `CHECKPOINT` after a preload. Returns whether a rewrite
/// ran (false when the server keeps no append-only file).
///
/// # Errors
/// When the server cannot be reached or the rewrite fails or does not finish in time.
pub async fn redis_settle(url: &str) -> Result<bool, Error> {
    let mut con = redis_connect(url).await?;
    if info_field(&redis_persistence(&mut con).await?, "aof_enabled") != Some("1") {
        return Ok(false);
    }
    // Refused only while a rewrite already runs; waiting for that one settles the file too.
    let _: Result<String, _> = redis::cmd("BGREWRITEAOF").query_async(&mut con).await;
    let deadline = Instant::now() + AOF_REWRITE_TIMEOUT;
    loop {
        let info = redis_persistence(&mut con).await?;
        let busy = ["aof_rewrite_in_progress", "aof_rewrite_scheduled"]
            .iter()
            .any(|name| info_field(&info, name) != Some("0"));
        if !busy {
            return match info_field(&info, "aof_last_bgrewrite_status") {
                Some("ok") => Ok(true),
                status => Err(format!("BGREWRITEAOF failed (status {status:?})")),
            };
        }
        if Instant::now() > deadline {
            return Err("BGREWRITEAOF did not finish in 10 minutes".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn redis_persistence(con: &mut redis::aio::MultiplexedConnection) -> Result<String, Error> {
    redis::cmd("INFO")
        .arg("persistence")
        .query_async(con)
        .await
        .map_err(redis_err("reading INFO persistence"))
}

/// The value of `name` in an `INFO` reply (`name:value` lines).
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
}

fn redis_key(kind: &str, n: usize) -> String {
    format!("{REDIS_PREFIX}{kind}:{n:012}")
}

async fn redis_clean(con: &mut redis::aio::MultiplexedConnection) -> Result<(), Error> {
    for chunk_start in (0..REDIS_KEYSPACE).step_by(1_000) {
        let mut cmd = redis::cmd("UNLINK");
        for n in chunk_start..(chunk_start + 1_000).min(REDIS_KEYSPACE) {
            for kind in ["s", "h", "r"] {
                cmd.arg(redis_key(kind, n));
            }
        }
        let _: i64 = cmd.query_async(con).await.map_err(redis_err("removing ceiling keys"))?;
    }
    for n in 0..REDIS_PAGE_SCOPES {
        let mut cmd = redis::cmd("UNLINK");
        cmd.arg(redis_key("i", n));
        for k in 0..REDIS_PAGE_RECORDS {
            cmd.arg(redis_page_record(n, k));
        }
        let _: i64 = cmd.query_async(con).await.map_err(redis_err("removing ceiling keys"))?;
    }
    Ok(())
}

/// The record key `k` of page scope `n`: `…:v:<n>:k<k>`, so the index holds `k0000`, ….
fn redis_page_record(n: usize, k: usize) -> String {
    format!("{REDIS_PREFIX}v:{n:012}:k{k:04}")
}

/// Loads 20,000 strings and hashes of 200-byte values and the CAS script.
async fn redis_prepare(url: &str, log: &(dyn Fn(&str) + Sync)) -> Result<RedisSession, Error> {
    let parts = redis_parts(url)?;
    let mut con = redis_connect(url).await?;
    redis_clean(&mut con).await?;
    log(&format!("ceiling: loading {REDIS_KEYSPACE} strings and hashes under {REDIS_PREFIX}"));
    for chunk_start in (0..REDIS_KEYSPACE).step_by(1_000) {
        let mut pipe = redis::pipe();
        for n in chunk_start..(chunk_start + 1_000).min(REDIS_KEYSPACE) {
            let text = workload::content(u64::try_from(n).unwrap_or(0));
            pipe.cmd("SET").arg(redis_key("s", n)).arg(&text).ignore();
            pipe.cmd("HSET")
                .arg(redis_key("r", n))
                .arg("rev")
                .arg(1)
                .arg("content")
                .arg(&text)
                .ignore();
        }
        let () = pipe.query_async(&mut con).await.map_err(redis_err("loading ceiling keys"))?;
    }
    log(&format!(
        "ceiling: loading {REDIS_PAGE_SCOPES} page scopes of {REDIS_PAGE_RECORDS} records"
    ));
    for chunk_start in (0..REDIS_PAGE_SCOPES).step_by(100) {
        let mut pipe = redis::pipe();
        for n in chunk_start..(chunk_start + 100).min(REDIS_PAGE_SCOPES) {
            for k in 0..REDIS_PAGE_RECORDS {
                // The workload's record numbering: the 10 preloaded records of scope n are
                // n * 10 + k, so the first of each holds the search phrase as there.
                let i = if k < 10 { n * 10 + k } else { REDIS_KEYSPACE + n };
                let text = workload::content(u64::try_from(i).unwrap_or(0));
                pipe.cmd("SET").arg(redis_page_record(n, k)).arg(text).ignore();
                pipe.cmd("ZADD").arg(redis_key("i", n)).arg(0).arg(format!("k{k:04}")).ignore();
            }
        }
        let () = pipe.query_async(&mut con).await.map_err(redis_err("loading ceiling keys"))?;
    }
    let load = |script: &'static str| {
        let mut con = con.clone();
        async move {
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(script)
                .query_async::<String>(&mut con)
                .await
                .map_err(redis_err("SCRIPT LOAD"))
        }
    };
    let sha = load(REDIS_CAS).await?;
    let page_sha = load(REDIS_PAGE).await?;
    Ok(RedisSession { con, sha, page_sha, parts })
}

impl RedisSession {
    async fn run(
        &mut self,
        test: &str,
        concurrency: usize,
        options: &CeilingOptions,
        log: &(dyn Fn(&str) + Sync),
    ) -> Result<CeilingResult, Error> {
        let value = workload::content(1);
        let rand = |kind: &str| format!("{REDIS_PREFIX}{kind}:__rand_int__");
        let command: Vec<String> = match test {
            "GET" => vec!["GET".into(), rand("s")],
            "SET" => vec!["SET".into(), rand("s"), value],
            "HSET" => vec!["HSET".into(), rand("h"), "content".into(), value],
            "EVALSHA" => {
                vec!["EVALSHA".into(), self.sha.clone(), "1".into(), rand("r"), "*".into(), value]
            }
            "PAGE" | "SEARCH" => {
                let query = if test == "PAGE" { "*" } else { workload::PHRASE };
                let limit = workload::LIST_LIMIT.to_string();
                let sha = self.page_sha.clone();
                vec!["EVALSHA".into(), sha, "1".into(), rand("i"), limit, query.into()]
            }
            other => return Err(format!("no redis-benchmark test {other}")),
        };
        log(&format!(
            "ceiling: redis-benchmark {test} -c {concurrency} -n {}",
            options.redis_requests
        ));
        let parts = &self.parts;
        let mut args: Vec<String> =
            vec!["-h".into(), parts.host.clone(), "-p".into(), parts.port.to_string()];
        if let Some(user) = &parts.user {
            args.extend(["--user".into(), user.clone()]);
        }
        if let Some(password) = &parts.password {
            args.extend(["-a".into(), password.clone(), "--no-auth-warning".into()]);
        }
        args.extend([
            "--dbnum".into(),
            parts.db.to_string(),
            "-c".into(),
            concurrency.to_string(),
            "-n".into(),
            options.redis_requests.to_string(),
            "-r".into(),
            if matches!(test, "PAGE" | "SEARCH") { REDIS_PAGE_SCOPES } else { REDIS_KEYSPACE }
                .to_string(),
            "--csv".into(),
        ]);
        args.extend(command);
        let output = tokio::process::Command::new(&options.redis_benchmark)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|err| format!("could not run {}: {err}", options.redis_benchmark))?;
        if !output.status.success() {
            return Err(format!(
                "redis-benchmark {test} exited with {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let mut result = parse_redis_benchmark_csv(&String::from_utf8_lossy(&output.stdout))
            .map_err(|err| format!("redis-benchmark {test}: {err}"))?;
        result.test = test.to_owned();
        result.concurrency = concurrency;
        result.ops = Some(options.redis_requests);
        Ok(result)
    }
}

/// Reads redis-benchmark's `--csv` output: a header, then
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`.
///
/// # Errors
/// When no data line is present.
pub fn parse_redis_benchmark_csv(stdout: &str) -> Result<CeilingResult, Error> {
    let line = stdout
        .lines()
        .map(str::trim)
        .rev()
        .find(|l| l.starts_with('"') && !l.starts_with("\"test\""))
        .ok_or_else(|| format!("no result line in output: {stdout}"))?;
    // The test name is quoted and our commands hold no quotes, so the numbers are the
    // quoted fields after it.
    let fields: Vec<f64> = line
        .rsplit("\",\"")
        .take(7)
        .filter_map(|f| f.trim_matches('"').parse::<f64>().ok())
        .collect();
    // rsplit yields the fields back to front: max, p99, p95, p50, min, avg, rps.
    if fields.len() < 7 {
        return Err(format!("unexpected line: {line}"));
    }
    let ms = |v: f64| Some(v * 1_000.0);
    Ok(CeilingResult {
        tool: "redis-benchmark",
        test: String::new(),
        concurrency: 0,
        ops_per_s: fields[6],
        mean_us: ms(fields[5]),
        p50_us: ms(fields[3]),
        p99_us: ms(fields[1]),
        ops: None,
        after_phase: None,
        note: None,
    })
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
    fn every_standard_phase_has_a_ceiling_on_every_stored_provider() {
        for phase in Phase::STANDARD {
            assert!(test_for("postgres", phase).is_some());
            assert!(test_for("redis", phase).is_some());
            assert!(test_for("sqlite", phase).is_some());
        }
        assert!(test_for("memory", Phase::Get).is_none());
    }
}
