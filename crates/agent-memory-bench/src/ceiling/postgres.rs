//! The PostgreSQL ceiling: `pgbench -M prepared` with the scripts of `ceilings/*.sql` against
//! a plain table of the store's row shape.

use std::process::Stdio;

use std::path::Path;

use super::batched::{self, BatchedSql};
use super::{CeilingResult, Error, Level};
use crate::target::pg_admin_url;
use crate::workload;

/// The tables, as shipped in `ceilings/`.
pub const PG_SCHEMA: &str = include_str!("../../ceilings/schema.sql");
/// The upsert statement of `put_new` and `put_update`, `{key}` standing for the key it writes.
pub const PG_UPSERT: &str = include_str!("../../ceilings/upsert.sql");

/// The pgbench script of every per-statement test, as shipped in `ceilings/`: `put_new` (the
/// upsert of a fresh key), `get` (one row by primary key), `put_update` (the upsert of an
/// existing key), `list` (first page of 20 by key) and `delete` (delete of an existing row).
/// The two puts are their own `\set` lines followed by [`PG_UPSERT`] on their key.
pub fn pg_scripts() -> [(&'static str, String); 5] {
    let upsert = |head: &str, key: &str| format!("{head}{}", PG_UPSERT.replace("{key}", key));
    [
        (
            "put_new",
            upsert(include_str!("../../ceilings/put_new.sql"), "'n' || lpad(:id::text, 8, '0')"),
        ),
        ("get", include_str!("../../ceilings/get.sql").to_owned()),
        (
            "put_update",
            upsert(include_str!("../../ceilings/put_update.sql"), "'k' || lpad(:k::text, 4, '0')"),
        ),
        ("list", include_str!("../../ceilings/list.sql").to_owned()),
        ("delete", include_str!("../../ceilings/delete.sql").to_owned()),
    ]
}

pub(super) const PG_TABLE: &str = "bench_ceiling_records";
pub(super) const PG_TABLE_DEL: &str = "bench_ceiling_records_del";

pub(super) fn pg_err(what: &str) -> impl Fn(tokio_postgres::Error) -> Error + '_ {
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

/// What a ceiling table's rows hold beyond the six columns every one starts with (`app`,
/// `user_id`, `namespace`, `key`, `content`, `metadata`): the other columns' names, and their
/// values in a preload row and in a delete pool row, each list led by a comma (or empty).
pub(super) struct MoreColumns<'a> {
    pub(super) names: &'a str,
    pub(super) preload: &'a str,
    pub(super) pool: &'a str,
}

impl MoreColumns<'_> {
    /// The plain ceiling table's rows: the six columns only.
    const NONE: MoreColumns<'static> = MoreColumns { names: "", preload: "", pool: "" };
}

/// Inserts the 20,000 preload records into `table`, in preload order. The preload binds its
/// users, namespaces, keys, contents and metadata (as JSON text) to `unnest` as `u`, `n`, `k`,
/// `c` and `m`, which `more.preload` may read.
pub(super) async fn insert_preload(
    client: &tokio_postgres::Client,
    table: &str,
    more: &MoreColumns<'_>,
    what: &str,
) -> Result<(), Error> {
    let mut columns: [Vec<String>; 5] = Default::default();
    for op in &workload::preload() {
        let row = [
            workload::user_id(op.user),
            op.namespace().to_owned(),
            op.key.clone(),
            workload::content(op.content_index),
            op.metadata().to_string(),
        ];
        for (column, value) in columns.iter_mut().zip(row) {
            column.push(value);
        }
    }
    let [users, namespaces, keys, contents, metadata] = &columns;
    client
        .execute(
            &format!(
                "INSERT INTO {table} (app, user_id, namespace, key, content, metadata{}) \
                 SELECT 'bench-app', u, n, k, c, m::jsonb{} \
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) \
                 AS t(u, n, k, c, m)",
                more.names, more.preload
            ),
            &[users, namespaces, keys, contents, metadata],
        )
        .await
        .map_err(pg_err(what))?;
    Ok(())
}

/// Inserts the delete pool into `table`: `pool` rows in namespace `scratch`, keys
/// `d00000000`, `d00000001`, … spread over the thousand users.
pub(super) async fn insert_delete_pool(
    client: &tokio_postgres::Client,
    table: &str,
    more: &MoreColumns<'_>,
    pool: u64,
    what: &str,
) -> Result<(), Error> {
    let last = i64::try_from(pool).unwrap_or(i64::MAX).saturating_sub(1);
    client
        .execute(
            &format!(
                "INSERT INTO {table} (app, user_id, namespace, key, content, metadata{}) \
                 SELECT 'bench-app', 'u' || lpad((i % 1000)::text, 4, '0'), 'scratch', \
                        'd' || lpad(i::text, 8, '0'), $1, '{{\"category\": \"scratch\"}}'{} \
                 FROM generate_series(0::bigint, $2::bigint) AS i",
                more.names, more.pool
            ),
            &[&workload::content(1), &last],
        )
        .await
        .map_err(pg_err(what))?;
    Ok(())
}

/// Counts the rows of `table`'s delete pool left.
pub(super) async fn count_pool(client: &tokio_postgres::Client, table: &str) -> Result<i64, Error> {
    let row = client
        .query_one(&format!("SELECT count(*) FROM {table} WHERE namespace = 'scratch'"), &[])
        .await
        .map_err(pg_err("counting the delete pool"))?;
    Ok(row.get(0))
}

/// What a delete test whose pool held `before` rows says when its `done` deletes removed
/// fewer (`after` rows are left).
fn pool_exhausted(before: i64, after: i64, done: u64) -> Option<String> {
    let removed = u64::try_from(before - after).unwrap_or(0);
    (removed < done).then(|| {
        format!(
            "delete pool exhausted: {removed} of {done} deletes hit a row; raise \
             --ceiling-delete-pool"
        )
    })
}

/// Creates the ceiling tables, loads the preload (and the delete pool) and settles the server.
pub(super) async fn pg_prepare(
    client: &tokio_postgres::Client,
    delete_pool: u64,
) -> Result<(), Error> {
    client.batch_execute(PG_SCHEMA).await.map_err(pg_err("creating the ceiling tables"))?;
    let plain = &MoreColumns::NONE;
    insert_preload(client, PG_TABLE, plain, "loading the ceiling preload").await?;
    client
        .batch_execute(&format!("INSERT INTO {PG_TABLE_DEL} SELECT * FROM {PG_TABLE}"))
        .await
        .map_err(pg_err("copying the preload"))?;
    insert_delete_pool(client, PG_TABLE_DEL, plain, delete_pool, "loading the delete pool").await?;
    // Separate calls: VACUUM refuses to run inside the implicit transaction of a
    // multi-statement batch.
    client
        .batch_execute(&format!("VACUUM (ANALYZE) {PG_TABLE}, {PG_TABLE_DEL}"))
        .await
        .map_err(pg_err("VACUUM (ANALYZE) of the ceiling tables"))?;
    client.batch_execute("CHECKPOINT").await.map_err(pg_err("CHECKPOINT"))?;
    Ok(())
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

/// The PostgreSQL side of a [`Session`](super::Session).
#[derive(Debug)]
pub struct PgSession {
    pub(super) client: tokio_postgres::Client,
    /// The provider's coalesced statements, once [`batched::prepare`] made their table.
    pub(super) batched: Option<BatchedSql>,
    pub(super) conninfo: String,
    pub(super) scripts: tempfile::TempDir,
    pub(super) url: String,
}

impl PgSession {
    pub(super) async fn run(
        &mut self,
        test: &str,
        level: Level<'_>,
    ) -> Result<CeilingResult, Error> {
        let Level { concurrency, options, log } = level;
        let path = self.scripts.path().join(format!("{test}.sql"));
        if !path.exists() {
            return Err(format!("no pgbench script for {test}"));
        }
        // Same starting point as the library phase before it: a fresh checkpoint, so both
        // pay the same full-page writes.
        self.client.batch_execute("CHECKPOINT").await.map_err(pg_err("CHECKPOINT"))?;
        let pool_before = if test == "delete" {
            Some(count_pool(&self.client, PG_TABLE_DEL).await?)
        } else {
            None
        };
        log(&format!("ceiling: pgbench {test} -c {concurrency} -T {}", options.pg_seconds));
        let mut result =
            pgbench(&options.pgbench, &self.conninfo, &path, concurrency, options.pg_seconds)
                .await
                .map_err(|err| format!("pgbench {test}: {err}"))?;
        result.test = test.to_owned();
        if let (Some(before), Some(done)) = (pool_before, result.ops) {
            let after = count_pool(&self.client, PG_TABLE_DEL).await?;
            if let Some(note) = pool_exhausted(before, after, done) {
                result.note = Some(note);
            }
        }
        Ok(result)
    }
}

impl PgSession {
    /// Runs the batched ceiling of `test`, one of [`BATCHED_TESTS`](super::BATCHED_TESTS):
    /// the provider's own coalesced statement, beside a library phase at the level's callers
    /// whose writes went out in statements of `batch`. As many writes are in flight:
    /// `concurrency / batch` pgbench clients (rounded, at least one) each sending statements
    /// of `batch` writes. Its `ops_per_s` counts writes: pgbench's statements per second
    /// times `batch`.
    ///
    /// # Errors
    /// When the batched ceiling could not be prepared, or pgbench cannot run or rejects the
    /// script.
    pub async fn run_batched(
        &mut self,
        test: &str,
        batch: usize,
        level: Level<'_>,
    ) -> Result<CeilingResult, Error> {
        let Level { concurrency, options, log } = level;
        let sql = self.batched.as_ref().ok_or("the batched ceiling was not prepared")?;
        let script = batched::script(sql, test, batch)?;
        let path = self.scripts.path().join(format!("{test}_batched.sql"));
        std::fs::write(&path, script)
            .map_err(|err| format!("writing {test}_batched.sql: {err}"))?;
        self.client.batch_execute("CHECKPOINT").await.map_err(pg_err("CHECKPOINT"))?;
        let before = if test == "delete" {
            Some(count_pool(&self.client, batched::TABLE).await?)
        } else {
            None
        };
        // Integer division rounding to nearest: 16 callers in batches of 4 are 4 clients.
        let clients = ((concurrency + batch / 2) / batch).max(1);
        log(&format!(
            "ceiling: pgbench {test}_batched (batches of {batch}) -c {clients} -T {}",
            options.pg_seconds
        ));
        let mut result =
            pgbench(&options.pgbench, &self.conninfo, &path, clients, options.pg_seconds)
                .await
                .map_err(|err| format!("pgbench {test}_batched: {err}"))?;
        result.concurrency = concurrency;
        result.test = format!("{test}_batched");
        let statements = result.ops;
        result.ops_per_s *= batch as f64;
        result.ops = statements.map(|n| n.saturating_mul(batch as u64));
        let mut notes: Vec<String> = result.note.take().into_iter().collect();
        notes.push(format!("{clients} clients, batches of {batch}"));
        if let (Some(before), Some(done)) = (before, result.ops) {
            let after = count_pool(&self.client, batched::TABLE).await?;
            notes.extend(pool_exhausted(before, after, done));
        }
        result.note = Some(notes.join("; "));
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

pub(super) async fn pgbench(
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
