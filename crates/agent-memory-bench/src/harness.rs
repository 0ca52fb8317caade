//! The run itself: for every store and concurrency level, an empty state, the preload, the five
//! timed phases and our two extra ones, the expected-state checks, then (on request) the
//! ceiling at the same concurrency and the scale run.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use agent_memory::postgres::{PostgresMemoryStore, WriteBatches};
use agent_memory::{MemoryScope, MemoryStore, MemoryWrite};

use crate::ceiling::{self, CeilingOptions, CeilingResult, Level, Session};
use crate::report::{
    push_json, BatchedCompared, CeilingRecord, Compared, Counted, PhaseRecord, Report, RunId,
    RunRecord, ScaleRecord,
};
use crate::runner::{self, BulkStats, PhaseStats};
use crate::target;
use crate::workload::{self, Counts, Phase, APP, NAMESPACES};

/// Concurrency used for untimed bulk work (cleanup, preload).
pub const LOAD_CONCURRENCY: usize = 16;
/// Concurrency (and PostgreSQL pool size) of the scale mode's load: more writers than the
/// preload's so that two million autocommitted writes share more of each WAL flush.
pub const SCALE_LOAD_CONCURRENCY: usize = 32;

/// Extra users of the scale mode: ten per benchmark user, named `u0123.x0` … `u0123.x9`, so in
/// every ordered index they sit between the benchmark users instead of after them.
pub const SCALE_USERS_PER_BENCH_USER: usize = 10;
/// Keys per namespace of an extra user: `x0000` … `x0099`.
pub const SCALE_KEYS_PER_NS: usize = 100;
/// Records per extra user.
pub const SCALE_RECORDS_PER_USER: usize = SCALE_KEYS_PER_NS * NAMESPACES.len();
/// The scale mode's default: 2,000,000 records held by 10,000 other users.
pub const DEFAULT_SCALE_RECORDS: usize = 2_000_000;

/// The `m`-th extra user.
pub fn scale_user_id(m: usize) -> String {
    format!("u{:04}.x{}", m / SCALE_USERS_PER_BENCH_USER, m % SCALE_USERS_PER_BENCH_USER)
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Store URLs, run in order.
    pub stores: Vec<String>,
    /// Concurrency levels, each from an empty state.
    pub concurrency: Vec<usize>,
    /// Op counts.
    pub counts: Counts,
    /// Run `put_cas` and `search` after the standard five.
    pub extra: bool,
    /// Run the scale mode with this many records held by other users.
    pub scale: Option<usize>,
    /// Run the ceilings for PostgreSQL and Redis stores.
    pub ceiling: bool,
    /// Ceiling settings.
    pub ceiling_options: CeilingOptions,
    /// Query parameters added to a PostgreSQL store URL so the store keeps exactly C
    /// connections, with `{c}` standing for C (`max_connections={c}&min_connections={c}` for
    /// our provider); `None` leaves the provider's default pool.
    pub pg_pool_query: Option<String>,
    /// Label the results as a smoke run (tiny counts, not a benchmark).
    pub smoke: bool,
    /// Tokio worker threads the run uses (reported).
    pub threads: usize,
}

/// Runs everything `config` asks for, streaming JSON lines to `json` as each (provider,
/// concurrency) finishes, and logging progress to stderr.
pub async fn run(config: &Config, mut json: Option<&mut (dyn Write + Send)>) -> Report {
    let mut report = Report::default();
    let started = Instant::now();
    let log = move |msg: &str| eprintln!("[{:>7.1}s] {msg}", started.elapsed().as_secs_f64());
    for url in &config.stores {
        let provider = match target::provider_of(url) {
            Ok(p) => p,
            Err(err) => {
                report.notes.push(format!("{}: {err}", target::redacted(url)));
                report.stopped = true;
                continue;
            }
        };
        let mut bench = ProviderBench::new(config, url, provider, &log);
        if let Err(err) = bench.run_all(&mut report, &mut json).await {
            log(&format!("{provider}: stopped: {err}"));
            report.notes.push(format!("{provider} ({}): stopped: {err}", target::redacted(url)));
            report.stopped = true;
        }
    }
    report
}

/// A mean batch size as the whole number of writes a ceiling statement carries, at least 1.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn whole_batch(mean: f64) -> usize {
    // Clamped first: a batch is at most the provider's `write_batch_max`, far below 2^32.
    mean.round().clamp(1.0, 1000.0) as usize
}

/// What one (provider, concurrency, mode) run produced.
struct RunOutput {
    run: RunRecord,
    phases: Vec<PhaseRecord>,
    ceilings: Vec<CeilingResult>,
    notes: Vec<String>,
}

struct ProviderBench<'a> {
    config: &'a Config,
    url: &'a str,
    provider: &'static str,
    store_label: String,
    /// The in-memory store lives in this process: the same instance serves every run, or the
    /// scale mode's records would vanish between runs.
    memory: Option<Arc<dyn MemoryStore>>,
    /// The PostgreSQL store [`open`](Self::open) built last, for its write batch counts.
    postgres: Option<Arc<PostgresMemoryStore>>,
    log: &'a (dyn Fn(&str) + Sync),
    server: Vec<(String, String)>,
}

type Error = String;

fn flush(json: &mut Option<&mut (dyn Write + Send)>, lines: &str) {
    if let Some(out) = json.as_mut() {
        let _ = out.write_all(lines.as_bytes());
        let _ = out.flush();
    }
}

impl<'a> ProviderBench<'a> {
    fn new(
        config: &'a Config,
        url: &'a str,
        provider: &'static str,
        log: &'a (dyn Fn(&str) + Sync),
    ) -> Self {
        Self {
            config,
            url,
            provider,
            store_label: target::redacted(url),
            memory: None,
            postgres: None,
            log,
            server: Vec::new(),
        }
    }

    fn mode(&self, scale: bool) -> &'static str {
        match (self.config.smoke, scale) {
            (true, false) => "smoke",
            (true, true) => "smoke-scale",
            (false, true) => "scale",
            (false, false) => "standard",
        }
    }

    fn run_id(&self, mode: &'static str, c: usize) -> RunId {
        RunId {
            mode,
            provider: self.provider.to_owned(),
            store: self.store_label.clone(),
            concurrency: c,
            pool: self.pool_description(c),
        }
    }

    fn pool_description(&self, c: usize) -> String {
        match self.provider {
            "postgres" => match &self.config.pg_pool_query {
                Some(query) => {
                    format!("{} (pool of exactly {c})", query.replace("{c}", &c.to_string()))
                }
                None => "provider default (no pool size parameter known)".to_owned(),
            },
            "redis" | "redis-cluster" => {
                "one multiplexed connection (connection manager), C tasks".to_owned()
            }
            _ => format!("in-process, {c} tasks"),
        }
    }

    fn store_url(&self, c: usize) -> Result<String, Error> {
        match (self.provider, &self.config.pg_pool_query) {
            ("postgres", Some(query)) => {
                let mut url = self.url.to_owned();
                for pair in query.replace("{c}", &c.to_string()).split('&') {
                    let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                    url = target::with_query(&url, name, value)?;
                }
                Ok(url)
            }
            _ => Ok(self.url.to_owned()),
        }
    }

    async fn open(&mut self, c: usize) -> Result<Arc<dyn MemoryStore>, Error> {
        if self.provider == "memory" {
            if let Some(store) = &self.memory {
                return Ok(Arc::clone(store));
            }
        }
        let url = self.store_url(c)?;
        let open_err = |err: agent_memory::MemoryError| format!("open: {}", runner::describe(&err));
        let store: Arc<dyn MemoryStore> = if self.provider == "postgres" {
            // The concrete store, so the run can read how its writes were batched.
            let store = Arc::new(PostgresMemoryStore::from_url(&url).map_err(open_err)?);
            self.postgres = Some(Arc::clone(&store));
            store
        } else {
            agent_memory::open(&url).map_err(open_err)?
        };
        store.start().await.map_err(|err| format!("start: {}", runner::describe(&err)))?;
        if self.provider == "memory" {
            self.memory = Some(Arc::clone(&store));
        }
        Ok(store)
    }

    async fn close(&self, store: &Arc<dyn MemoryStore>) {
        if let Err(err) = store.close().await {
            (self.log)(&format!("close: {}", runner::describe(&err)));
        }
    }

    /// Brings the server to a settled state after a preload, before anything is timed.
    async fn settle(&self) -> Result<(), Error> {
        if self.provider == "postgres" {
            (self.log)("VACUUM (ANALYZE) and CHECKPOINT");
            ceiling::pg_settle(self.url).await?;
        }
        if self.provider == "redis" && ceiling::redis_settle(self.url).await? {
            (self.log)("rewrote the append-only file (BGREWRITEAOF)");
        }
        Ok(())
    }

    async fn read_settings(&mut self, report: &mut Report) {
        let settings = match self.provider {
            "postgres" => ceiling::pg_settings(self.url).await,
            "redis" => ceiling::redis_settings(self.url).await,
            _ => Ok(Vec::new()),
        };
        match settings {
            Ok(settings) => {
                let wanted: &[(&str, &str)] = match self.provider {
                    "postgres" => &[
                        ("synchronous_commit", "on"),
                        ("fsync", "on"),
                        ("shared_buffers", "128MB"),
                    ],
                    "redis" => &[("appendonly", "yes"), ("appendfsync", "everysec"), ("save", "")],
                    _ => &[],
                };
                for (name, value) in wanted {
                    let found = settings.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
                    if found != Some(value) {
                        let note = format!(
                            "{} {}: {name} is {:?}, WORKLOAD.md runs with {value:?}",
                            self.provider,
                            self.store_label,
                            found.unwrap_or("?")
                        );
                        (self.log)(&format!("warning: {note}"));
                        report.notes.push(note);
                    }
                }
                self.server = settings;
            }
            Err(err) => (self.log)(&format!("could not read server settings: {err}")),
        }
    }

    async fn run_all(
        &mut self,
        report: &mut Report,
        json: &mut Option<&mut (dyn Write + Send)>,
    ) -> Result<(), Error> {
        self.read_settings(report).await;
        if self.provider == "postgres" && self.config.pg_pool_query.is_none() {
            report.notes.push(
                "postgres: no pool parameters given (--pg-pool-query), so the pool is the \
                 provider's default, not exactly C connections"
                    .to_owned(),
            );
        }
        let mut standard: Vec<PhaseRecord> = Vec::new();
        for &c in &self.config.concurrency {
            let out = self.run_one(c, None).await?;
            let (run, phases) = (out.run, out.phases);
            report.notes.extend(out.notes);
            for result in out.ceilings {
                report.ceilings.push(CeilingRecord {
                    kind: "ceiling",
                    provider: self.provider.to_owned(),
                    store: self.store_label.clone(),
                    result,
                });
            }
            let mut lines = String::new();
            push_json(&mut lines, &run);
            for p in &phases {
                push_json(&mut lines, p);
            }
            for c_rec in report.ceilings.iter().filter(|r| {
                r.provider == self.provider
                    && r.store == self.store_label
                    && r.result.concurrency == c
            }) {
                push_json(&mut lines, c_rec);
            }
            flush(json, &lines);
            report.runs.push(run);
            standard.extend(phases.iter().cloned());
            report.phases.extend(phases);
        }
        if let Some(extra) = self.config.scale {
            self.scale_load(extra).await?;
            let result = self.scale_runs(extra, &standard, report, json).await;
            self.scale_unload().await?;
            result?;
        }
        if let Some(store) = self.memory.take() {
            self.close(&store).await;
        }
        Ok(())
    }

    async fn scale_runs(
        &mut self,
        extra: usize,
        standard: &[PhaseRecord],
        report: &mut Report,
        json: &mut Option<&mut (dyn Write + Send)>,
    ) -> Result<(), Error> {
        for &c in &self.config.concurrency {
            let out = self.run_one(c, Some(extra)).await?;
            report.notes.extend(out.notes);
            let (run, mut phases) = (out.run, out.phases);
            for p in &mut phases {
                let base = standard
                    .iter()
                    .find(|s| s.run.concurrency == c && s.phase == p.phase)
                    .map(|s| s.p50_us);
                let p50_us = p.p50_us;
                if let Some(scale) = &mut p.scale {
                    scale.standard_p50_us = base;
                    scale.p50_growth = base.filter(|&b| b > 0.0).map(|b| p50_us / b);
                }
            }
            let mut lines = String::new();
            push_json(&mut lines, &run);
            for p in &phases {
                push_json(&mut lines, p);
            }
            flush(json, &lines);
            report.runs.push(run);
            report.phases.extend(phases);
        }
        Ok(())
    }

    /// The store the untimed bulk work goes through: for PostgreSQL at small C a second store
    /// with a 16-connection pool, so that loading does not take minutes; the measured store
    /// otherwise.
    async fn loader(
        &mut self,
        measured: &Arc<dyn MemoryStore>,
        c: usize,
    ) -> Result<(Arc<dyn MemoryStore>, bool), Error> {
        if self.provider == "postgres" && c < LOAD_CONCURRENCY {
            Ok((self.open(LOAD_CONCURRENCY).await?, true))
        } else {
            Ok((Arc::clone(measured), false))
        }
    }

    async fn run_one(
        &mut self,
        c: usize,
        extra_records: Option<usize>,
    ) -> Result<RunOutput, Error> {
        let mode = self.mode(extra_records.is_some());
        let mut notes = Vec::new();
        let mut ceilings = Vec::new();
        let log = self.log;
        log(&format!("{} C={c} {mode}: cleaning, preloading", self.provider));
        let store = self.open(c).await?;
        // Taken before the loader, which may open a store of its own.
        let batches_of = self.postgres.take();
        let (loader, separate) = self.loader(&store, c).await?;
        let cleaned = runner::delete_bench_users(Arc::clone(&loader), LOAD_CONCURRENCY)
            .await
            .ok("erasing the benchmark users")?;
        let preload = runner::preload(Arc::clone(&loader), LOAD_CONCURRENCY).await.ok("preload")?;
        if separate {
            self.close(&loader).await;
        }
        log(&format!(
            "preloaded {} records in {:.1}s ({:.0}/s)",
            preload.items,
            preload.elapsed.as_secs_f64(),
            preload.rate()
        ));
        // The ceiling's data goes in next to the preload, so one settle covers both.
        let options = &self.config.ceiling_options;
        let level = Level { concurrency: c, options, log };
        let mut session = None;
        if self.config.ceiling && extra_records.is_none() {
            match Session::prepare(self.provider, self.url, options, log).await {
                Ok(s) => session = s,
                Err(err) => {
                    log(&format!("ceiling unavailable: {err}"));
                    notes.push(format!("{} C={c}: ceiling unavailable: {err}", self.provider));
                }
            }
        }
        self.settle().await?;
        runner::warm_up(Arc::clone(&store), c).await.ok("warm-up")?;

        let counts = &self.config.counts;
        let scopes = Arc::new(runner::bench_scopes().map_err(|err| err.to_string())?);
        let mut phases = Vec::new();
        let mut list: Vec<Phase> = Phase::STANDARD.to_vec();
        if self.config.extra {
            list.extend(Phase::EXTRA);
        }
        for phase in list {
            let n = counts.of(phase);
            let ops = workload::ops(phase, n, counts.put_new);
            let ceiling_test = session.as_ref().and(ceiling::test_for(self.provider, phase));
            if ceiling_test.is_some() && self.provider == "postgres" {
                // Interleaved with pgbench, each phase starts from a checkpoint like its
                // ceiling does.
                ceiling::pg_checkpoint(self.url).await?;
            }
            let before = batches_of.as_ref().map(|pg| pg.write_batches());
            let stats = runner::run_phase(Arc::clone(&store), Arc::clone(&scopes), &ops, c).await;
            let mean_batch =
                batches_of.as_ref().zip(before).and_then(|(pg, before): (_, WriteBatches)| {
                    pg.write_batches().since(before).mean()
                });
            log(&format!(
                "{} C={c} {mode} {:<10} {:>7} ops {:>10.0} ops/s  p50 {:>8.1} µs  p99 {:>8.1} µs{}",
                self.provider,
                phase.name(),
                stats.ops,
                stats.ops_per_s(),
                stats.percentile_us(50),
                stats.percentile_us(99),
                if stats.errors > 0 { format!("  {} errors", stats.errors) } else { String::new() }
            ));
            let mut record = self.phase_record(mode, c, phase, &stats, extra_records);
            record.mean_batch = mean_batch;
            if phase == Phase::Delete {
                let counted = runner::count_bench_records(Arc::clone(&store), c.max(4))
                    .await
                    .ok("counting records")?;
                let expected = u64::try_from(counts.records_after_delete()).unwrap_or(0);
                record.counted =
                    Some(Counted { records_after: counted.total, records_expected: expected });
                record.checks_ok &= counted.total == expected;
            }
            if let (Some(s), Some(test)) = (session.as_mut(), ceiling_test) {
                match s.run(test, level).await {
                    Ok(mut result) => {
                        result.after_phase = Some(phase.name().to_owned());
                        record.ceiling = Some(Compared {
                            ceiling_test: test.to_owned(),
                            ceiling_ops_per_s: result.ops_per_s,
                            ratio: (result.ops_per_s > 0.0)
                                .then(|| record.ops_per_s / result.ops_per_s),
                        });
                        ceilings.push(result);
                    }
                    Err(err) => {
                        log(&format!("ceiling {test} failed: {err}"));
                        notes.push(format!("{} C={c} ceiling {test} failed: {err}", self.provider));
                    }
                }
                // The limit of the provider's own design: its coalesced statement, with the
                // batch the library formed in this phase.
                let batch = mean_batch.map_or(1, whole_batch);
                let pg = s.postgres().filter(|_| ceiling::BATCHED_TESTS.contains(&test));
                let batched = match pg {
                    Some(pg) => Some(pg.run_batched(test, batch, level).await),
                    None => None,
                };
                match batched {
                    Some(Ok(mut result)) => {
                        result.after_phase = Some(phase.name().to_owned());
                        record.batched = Some(BatchedCompared {
                            batched_ceiling_ops_per_s: result.ops_per_s,
                            batched_ratio: (result.ops_per_s > 0.0)
                                .then(|| record.ops_per_s / result.ops_per_s),
                        });
                        ceilings.push(result);
                    }
                    Some(Err(err)) => {
                        log(&format!("batched ceiling {test} failed: {err}"));
                        notes.push(format!(
                            "{} C={c} batched ceiling {test} failed: {err}",
                            self.provider
                        ));
                    }
                    None => {}
                }
            }
            phases.push(record);
        }
        if let Some(mut s) = session {
            for test in s.context_tests() {
                match s.run(test, level).await {
                    Ok(result) => ceilings.push(result),
                    Err(err) => {
                        notes.push(format!("{} C={c} ceiling {test}: {err}", self.provider))
                    }
                }
            }
            if let Err(err) = s.finish().await {
                notes.push(format!("{} C={c}: ceiling cleanup failed: {err}", self.provider));
            }
        }
        // Leave the server as we found it; the next run would erase these anyway.
        runner::delete_bench_users(Arc::clone(&store), LOAD_CONCURRENCY)
            .await
            .ok("erasing the benchmark users")?;
        if self.provider != "memory" {
            self.close(&store).await;
        }
        let run = RunRecord {
            kind: "run",
            run: self.run_id(mode, c),
            counts: counts_json(counts, self.config.extra),
            cleaned: cleaned.total,
            preload_seconds: preload.elapsed.as_secs_f64(),
            extra_records,
            server: self.server.clone(),
            threads: self.config.threads,
        };
        Ok(RunOutput { run, phases, ceilings, notes })
    }

    fn phase_record(
        &self,
        mode: &'static str,
        c: usize,
        phase: Phase,
        stats: &PhaseStats,
        extra_records: Option<usize>,
    ) -> PhaseRecord {
        let avg_items =
            matches!(phase, Phase::List | Phase::Search | Phase::SearchWords | Phase::ListMeta)
                .then(|| stats.items as f64 / stats.ops.max(1) as f64);
        let misses_ok = match phase {
            Phase::Get | Phase::Delete => stats.misses == 0,
            _ => true,
        };
        PhaseRecord {
            kind: "phase",
            run: self.run_id(mode, c),
            phase: phase.name().to_owned(),
            extra: Phase::EXTRA.contains(&phase),
            ops: stats.ops,
            seconds: stats.elapsed.as_secs_f64(),
            ops_per_s: stats.ops_per_s(),
            p50_us: stats.percentile_us(50),
            p99_us: stats.percentile_us(99),
            mean_us: stats.mean_us(),
            errors: stats.errors,
            first_error: stats.first_error.clone(),
            misses: stats.misses,
            conflicts: stats.conflicts,
            avg_items,
            counted: None,
            checks_ok: stats.errors == 0 && misses_ok,
            ceiling: None,
            mean_batch: None,
            batched: None,
            scale: extra_records.map(|extra_records| ScaleRecord {
                extra_records,
                standard_p50_us: None,
                p50_growth: None,
            }),
        }
    }

    /// Loads `extra` records into the scale mode's other users, through a store of
    /// [`SCALE_LOAD_CONCURRENCY`] connections.
    async fn scale_load(&mut self, extra: usize) -> Result<(), Error> {
        let log = self.log;
        let store = self.open(SCALE_LOAD_CONCURRENCY).await?;
        let cleaned = self.scale_erase(&store, extra).await?;
        log(&format!("scale: erased {} leftover extra records; loading {extra}", cleaned.total));
        let loader = Arc::clone(&store);
        let stats = runner::bulk(extra, SCALE_LOAD_CONCURRENCY, move |r| {
            let store = Arc::clone(&store);
            Box::pin(async move {
                let m = r / SCALE_RECORDS_PER_USER;
                let rem = r % SCALE_RECORDS_PER_USER;
                let ns = NAMESPACES[rem / SCALE_KEYS_PER_NS];
                let k = rem % SCALE_KEYS_PER_NS;
                let scope = MemoryScope::new(APP, scale_user_id(m))?.with_namespace(ns)?;
                let n = workload::Contents::Scale.index(u64::try_from(r).unwrap_or(0));
                let write = MemoryWrite::new(workload::content(n))
                    .metadata(serde_json::json!({ "category": ns, "n": n }));
                store.put(&scope, &format!("x{k:04}"), write).await.map(|_| 1)
            })
        })
        .await
        .ok("scale load")?;
        log(&format!(
            "scale: loaded {} records in {:.1}s ({:.0}/s)",
            stats.items,
            stats.elapsed.as_secs_f64(),
            stats.rate()
        ));
        if self.provider != "memory" {
            self.close(&loader).await;
        }
        Ok(())
    }

    async fn scale_erase(
        &self,
        store: &Arc<dyn MemoryStore>,
        extra: usize,
    ) -> Result<BulkStats, Error> {
        // A real run erases at least the default population, so leftovers of an earlier, larger
        // run go too; a smoke run only what it loads.
        let floor = if self.config.smoke { 0 } else { DEFAULT_SCALE_RECORDS };
        let users = extra.max(floor).div_ceil(SCALE_RECORDS_PER_USER);
        let store = Arc::clone(store);
        runner::bulk(users, SCALE_LOAD_CONCURRENCY, move |m| {
            let store = Arc::clone(&store);
            Box::pin(async move { store.delete_user(APP, &scale_user_id(m)).await })
        })
        .await
        .ok("erasing the scale users")
    }

    async fn scale_unload(&mut self) -> Result<(), Error> {
        let store = self.open(SCALE_LOAD_CONCURRENCY).await?;
        let erased = self.scale_erase(&store, self.config.scale.unwrap_or(0)).await?;
        (self.log)(&format!("scale: erased {} extra records", erased.total));
        if self.provider != "memory" {
            self.close(&store).await;
        }
        Ok(())
    }
}

fn counts_json(counts: &Counts, extra: bool) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    map.insert("preload".into(), workload::N_PRELOAD.into());
    for phase in Phase::STANDARD {
        map.insert(phase.name().into(), counts.of(phase).into());
    }
    if extra {
        for phase in Phase::EXTRA {
            map.insert(phase.name().into(), counts.of(phase).into());
        }
    }
    serde_json::Value::Object(map)
}
