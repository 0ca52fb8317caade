//! The Redis ceiling: `redis-benchmark` with GET, SET, HSET and EVALSHA of the scripts of
//! `ceilings/*.lua`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{CeilingResult, Error, Level};
use crate::target::{redis_admin_url, redis_benchmark_flags, redis_tls_files, RedisTlsFiles};
use crate::workload;

/// The Redis compare-and-set script.
pub const REDIS_CAS: &str = include_str!("../../ceilings/cas.lua");
/// The Redis page script: a page of a scope's records, filtered by a query for search.
pub const REDIS_PAGE: &str = include_str!("../../ceilings/page.lua");

pub(super) const REDIS_PREFIX: &str = "bench-ceiling:";
/// `redis-benchmark -r`: random key numbers are drawn below this, and printed in 12 digits.
pub(super) const REDIS_KEYSPACE: usize = 20_000;
/// Scopes (user × namespace) of the page ceiling, as in the workload.
pub(super) const REDIS_PAGE_SCOPES: usize = 2_000;
/// Records per scope of the page ceiling: the workload's 10 preloaded ones and about one
/// `put_new` record each.
pub(super) const REDIS_PAGE_RECORDS: usize = 11;

/// The Redis side of a [`Session`](super::Session).
pub struct RedisSession {
    pub(super) con: redis::aio::MultiplexedConnection,
    pub(super) sha: String,
    pub(super) page_sha: String,
    /// redis-benchmark's flags for the server.
    pub(super) server: Vec<String>,
}

impl std::fmt::Debug for RedisSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The server flags hold the password.
        f.debug_struct("RedisSession").field("sha", &self.sha).finish_non_exhaustive()
    }
}

pub(super) fn redis_err(what: &str) -> impl Fn(redis::RedisError) -> Error + '_ {
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
pub(super) const AOF_REWRITE_TIMEOUT: Duration = Duration::from_secs(600);

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

pub(super) async fn redis_persistence(
    con: &mut redis::aio::MultiplexedConnection,
) -> Result<String, Error> {
    redis::cmd("INFO")
        .arg("persistence")
        .query_async(con)
        .await
        .map_err(redis_err("reading INFO persistence"))
}

/// The value of `name` in an `INFO` reply (`name:value` lines).
pub(super) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
}

pub(super) fn redis_key(kind: &str, n: usize) -> String {
    format!("{REDIS_PREFIX}{kind}:{n:012}")
}

pub(super) async fn redis_clean(con: &mut redis::aio::MultiplexedConnection) -> Result<(), Error> {
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
pub(super) fn redis_page_record(n: usize, k: usize) -> String {
    format!("{REDIS_PREFIX}v:{n:012}:k{k:04}")
}

/// Loads 20,000 strings and hashes of 200-byte values and the CAS script.
pub(super) async fn redis_prepare(
    url: &str,
    log: &(dyn Fn(&str) + Sync),
) -> Result<RedisSession, Error> {
    let server = redis_benchmark_flags(url)?;
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
    Ok(RedisSession { con, sha, page_sha, server })
}

impl RedisSession {
    pub(super) async fn run(
        &mut self,
        test: &str,
        level: Level<'_>,
    ) -> Result<CeilingResult, Error> {
        let Level { concurrency, options, log } = level;
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
        let mut args = self.server.clone();
        args.extend([
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
