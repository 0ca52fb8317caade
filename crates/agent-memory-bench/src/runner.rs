//! Drives op lists against a store the way WORKLOAD.md's execution model says: C workers pull
//! the next op index from one shared counter, each store call is timed on its own, and a
//! phase's throughput is its op count over the time from releasing the workers to the last one
//! finishing.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_memory::{
    MemoryError, MemoryScope, MemoryStore, MemoryWrite, MetadataFilter, PageRequest,
};

use crate::workload::{self, Op, OpKind, APP, LIST_LIMIT, NAMESPACES, N_USERS, PHRASE, TWO_WORDS};

/// The scopes of the benchmark users, laid out as `user * 2 + namespace` like
/// [`Op::scope_index`], built once so no op pays for validating its scope.
pub fn bench_scopes() -> Result<Vec<MemoryScope>, MemoryError> {
    let mut scopes = Vec::with_capacity(N_USERS * NAMESPACES.len());
    for u in 0..N_USERS {
        let user = MemoryScope::new(APP, workload::user_id(u))?;
        for ns in NAMESPACES {
            scopes.push(user.with_namespace(ns)?);
        }
    }
    Ok(scopes)
}

/// The write of a `Put` or `Cas` op: the op's content text and `{"category", "n"}` metadata.
pub fn write_of(op: &Op) -> MemoryWrite {
    MemoryWrite::new(workload::content(op.content_index)).metadata(op.metadata())
}

/// One op ready to run: its scope by index and, for writes, the write built up front so that
/// building it is not part of the phase.
#[derive(Debug)]
struct Prepared {
    kind: OpKind,
    scope: usize,
    key: String,
    /// Taken exactly once, by the worker that draws this op.
    write: Mutex<Option<MemoryWrite>>,
}

struct PhaseInput {
    store: Arc<dyn MemoryStore>,
    scopes: Arc<Vec<MemoryScope>>,
    ops: Vec<Prepared>,
    next: AtomicUsize,
}

/// What a phase measured, before it is labelled for the report.
#[derive(Debug, Clone, Default)]
pub struct PhaseStats {
    /// Ops run.
    pub ops: usize,
    /// From releasing the workers to the last one finishing.
    pub elapsed: Duration,
    /// Latency of every op in nanoseconds, sorted.
    pub latencies_ns: Vec<u64>,
    /// Ops that failed with an error other than an expected conflict.
    pub errors: usize,
    /// The first such error, with its source chain, for the operator.
    pub first_error: Option<String>,
    /// `get` that found nothing, `delete` that removed nothing, `put_cas` that read nothing
    /// (and so wrote create-only).
    pub misses: usize,
    /// `put_cas` writes refused as `Conflict` (another worker wrote the key in between).
    pub conflicts: usize,
    /// Rows returned by `list` and `search`, summed.
    pub items: u64,
}

/// `count` over `elapsed`, per second; 0 when no time passed.
fn per_second(count: usize, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

impl PhaseStats {
    /// Ops per second over the phase's wall time.
    pub fn ops_per_s(&self) -> f64 {
        per_second(self.ops, self.elapsed)
    }

    /// Nearest-rank percentile `sorted[ceil(q * N) - 1]` for `q = percent / 100`, in
    /// microseconds; computed in integers so the rank is exact.
    pub fn percentile_us(&self, percent: usize) -> f64 {
        percentile_ns(&self.latencies_ns, percent) as f64 / 1_000.0
    }

    /// Mean latency in microseconds.
    pub fn mean_us(&self) -> f64 {
        if self.latencies_ns.is_empty() {
            return 0.0;
        }
        let total: u128 = self.latencies_ns.iter().map(|&ns| u128::from(ns)).sum();
        total as f64 / self.latencies_ns.len() as f64 / 1_000.0
    }

    fn absorb(&mut self, other: WorkerOut) {
        self.latencies_ns.extend(other.latencies_ns);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.misses += other.misses;
        self.conflicts += other.conflicts;
        self.items += other.items;
    }
}

/// Nearest rank over `sorted`: index `ceil(percent * N / 100) - 1`, 0 for an empty list.
pub fn percentile_ns(sorted: &[u64], percent: usize) -> u64 {
    let n = sorted.len();
    if n == 0 {
        return 0;
    }
    let rank = (percent * n).div_ceil(100).clamp(1, n);
    sorted[rank - 1]
}

#[derive(Debug, Default)]
struct WorkerOut {
    latencies_ns: Vec<u64>,
    errors: usize,
    first_error: Option<String>,
    misses: usize,
    conflicts: usize,
    items: u64,
    finished: Option<Instant>,
}

impl WorkerOut {
    fn error(&mut self, err: &MemoryError) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(describe(err));
        }
    }
}

/// The error and its source chain: the report is for operators, who need the driver's words.
pub fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Runs one timed phase: `ops` against `store` with `concurrency` workers.
pub async fn run_phase(
    store: Arc<dyn MemoryStore>,
    scopes: Arc<Vec<MemoryScope>>,
    ops: &[Op],
    concurrency: usize,
) -> PhaseStats {
    let prepared = ops
        .iter()
        .map(|op| Prepared {
            kind: op.kind,
            scope: op.scope_index(),
            key: op.key.clone(),
            write: Mutex::new(match op.kind {
                OpKind::Put | OpKind::Cas => Some(write_of(op)),
                _ => None,
            }),
        })
        .collect();
    let input = Arc::new(PhaseInput { store, scopes, ops: prepared, next: AtomicUsize::new(0) });
    let workers = concurrency.max(1);
    let ready = Arc::new(tokio::sync::Barrier::new(workers + 1));
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let input = Arc::clone(&input);
        let ready = Arc::clone(&ready);
        let mut go = go_rx.clone();
        handles.push(tokio::spawn(async move {
            ready.wait().await;
            // The sender lives until every worker is joined, so this only returns once `go` is
            // true.
            let _ = go.wait_for(|released| *released).await;
            worker(&input).await
        }));
    }
    ready.wait().await;
    let released = Instant::now();
    let _ = go_tx.send(true);

    let mut stats = PhaseStats { ops: ops.len(), ..PhaseStats::default() };
    stats.latencies_ns.reserve(ops.len());
    let mut last = released;
    for handle in handles {
        match handle.await {
            Ok(out) => {
                if let Some(finished) = out.finished {
                    last = last.max(finished);
                }
                stats.absorb(out);
            }
            Err(join) => {
                stats.errors += 1;
                stats.first_error.get_or_insert_with(|| format!("worker panicked: {join}"));
            }
        }
    }
    drop(go_tx);
    stats.elapsed = last.duration_since(released);
    stats.latencies_ns.sort_unstable();
    stats
}

async fn worker(input: &PhaseInput) -> WorkerOut {
    let mut out = WorkerOut {
        latencies_ns: Vec::with_capacity(input.ops.len() / 4 + 16),
        ..WorkerOut::default()
    };
    let store = &*input.store;
    loop {
        let index = input.next.fetch_add(1, Ordering::Relaxed);
        let Some(op) = input.ops.get(index) else { break };
        let scope = &input.scopes[op.scope];
        match op.kind {
            OpKind::Put => {
                let write = take(&op.write);
                let started = Instant::now();
                let result = store.put(scope, &op.key, write).await;
                out.latencies_ns.push(nanos(started.elapsed()));
                if let Err(err) = result {
                    out.error(&err);
                }
            }
            OpKind::Get => {
                let started = Instant::now();
                let result = store.get(scope, &op.key).await;
                out.latencies_ns.push(nanos(started.elapsed()));
                match result {
                    Ok(Some(_)) => {}
                    Ok(None) => out.misses += 1,
                    Err(err) => out.error(&err),
                }
            }
            OpKind::List => {
                let started = Instant::now();
                let result = store.list(scope, PageRequest::new(LIST_LIMIT)).await;
                out.latencies_ns.push(nanos(started.elapsed()));
                match result {
                    Ok(page) => out.items += u64::try_from(page.items.len()).unwrap_or(0),
                    Err(err) => out.error(&err),
                }
            }
            OpKind::Delete => {
                let started = Instant::now();
                let result = store.delete(scope, &op.key, None).await;
                out.latencies_ns.push(nanos(started.elapsed()));
                match result {
                    Ok(true) => {}
                    Ok(false) => out.misses += 1,
                    Err(err) => out.error(&err),
                }
            }
            OpKind::Cas => {
                let write = take(&op.write);
                // One logical compare-and-set: the read and the conditional write are timed
                // together, as an application's read-compute-write step would be.
                let started = Instant::now();
                let result = match store.get(scope, &op.key).await {
                    Ok(Some(record)) => {
                        store.put(scope, &op.key, write.expected_revision(record.revision)).await
                    }
                    Ok(None) => {
                        out.misses += 1;
                        store.put(scope, &op.key, write.create_only()).await
                    }
                    Err(err) => Err(err),
                };
                out.latencies_ns.push(nanos(started.elapsed()));
                match result {
                    Ok(_) => {}
                    Err(MemoryError::Conflict { .. }) => out.conflicts += 1,
                    Err(err) => out.error(&err),
                }
            }
            OpKind::Search | OpKind::SearchWords | OpKind::ListMeta => {
                let started = Instant::now();
                let result = match op.kind {
                    OpKind::Search => {
                        store.search(scope, PHRASE, PageRequest::new(LIST_LIMIT)).await
                    }
                    OpKind::SearchWords => {
                        let page = PageRequest::new(LIST_LIMIT).all_words().ignore_case();
                        store.search(scope, TWO_WORDS, page).await
                    }
                    _ => {
                        // Every record of the workload has its namespace as `category`.
                        let category = scope.namespace().unwrap_or_default();
                        let filter = MetadataFilter::new().field("category", category);
                        store.list(scope, PageRequest::new(LIST_LIMIT).metadata(filter)).await
                    }
                };
                out.latencies_ns.push(nanos(started.elapsed()));
                match result {
                    Ok(page) => out.items += u64::try_from(page.items.len()).unwrap_or(0),
                    Err(err) => out.error(&err),
                }
            }
        }
    }
    out.finished = Some(Instant::now());
    out
}

fn take(slot: &Mutex<Option<MemoryWrite>>) -> MemoryWrite {
    slot.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .unwrap_or_else(|| MemoryWrite::new(String::new()))
}

/// A boxed future, so one helper can run any kind of untimed bulk work.
pub type Task = Pin<Box<dyn Future<Output = Result<u64, MemoryError>> + Send>>;

/// What an untimed bulk job (cleanup, preload, scale load, counting) did.
#[derive(Debug, Clone, Default)]
pub struct BulkStats {
    /// Items processed.
    pub items: usize,
    /// Sum of the per-item results (records deleted, counted, …).
    pub total: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Items that failed.
    pub errors: usize,
    /// The first failure.
    pub first_error: Option<String>,
}

impl BulkStats {
    /// Items per second.
    pub fn rate(&self) -> f64 {
        per_second(self.items, self.elapsed)
    }

    /// `Err` with the first failure when anything failed.
    ///
    /// # Errors
    /// A readable message naming the job and the first failure.
    pub fn ok(self, what: &str) -> Result<Self, String> {
        match self.errors {
            0 => Ok(self),
            n => Err(format!(
                "{what}: {n} of {} items failed; first: {}",
                self.items,
                self.first_error.as_deref().unwrap_or("?")
            )),
        }
    }
}

/// Runs `task(i)` for every `i` in `0..n` on `concurrency` workers pulling from one counter.
pub async fn bulk<F>(n: usize, concurrency: usize, task: F) -> BulkStats
where
    F: Fn(usize) -> Task + Send + Sync + 'static,
{
    let task = Arc::new(task);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    // Long loads (the scale mode's two million records) say how far they are every 30 s.
    let ticker = {
        let next = Arc::clone(&next);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(30));
            tick.tick().await;
            loop {
                tick.tick().await;
                let done = next.load(Ordering::Relaxed).min(n);
                eprintln!(
                    "           … {done} of {n} after {:.0}s",
                    started.elapsed().as_secs_f64()
                );
            }
        })
    };
    let mut handles = Vec::new();
    for _ in 0..concurrency.max(1) {
        let task = Arc::clone(&task);
        let next = Arc::clone(&next);
        handles.push(tokio::spawn(async move {
            let mut out = BulkStats::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                out.items += 1;
                match task(i).await {
                    Ok(v) => out.total += v,
                    Err(err) => {
                        out.errors += 1;
                        out.first_error.get_or_insert_with(|| describe(&err));
                    }
                }
            }
            out
        }));
    }
    let mut stats = BulkStats::default();
    for handle in handles {
        match handle.await {
            Ok(out) => {
                stats.items += out.items;
                stats.total += out.total;
                stats.errors += out.errors;
                if stats.first_error.is_none() {
                    stats.first_error = out.first_error;
                }
            }
            Err(join) => {
                stats.errors += 1;
                stats.first_error.get_or_insert_with(|| format!("worker panicked: {join}"));
            }
        }
    }
    ticker.abort();
    stats.elapsed = started.elapsed();
    stats
}

/// Erases users `u0000` … `u0999` of `bench-app`: every run starts from an empty state.
pub async fn delete_bench_users(store: Arc<dyn MemoryStore>, concurrency: usize) -> BulkStats {
    bulk(N_USERS, concurrency, move |u| {
        let store = Arc::clone(&store);
        Box::pin(async move { store.delete_user(APP, &workload::user_id(u)).await })
    })
    .await
}

/// Writes the 20,000 preload records (not timed).
pub async fn preload(store: Arc<dyn MemoryStore>, concurrency: usize) -> BulkStats {
    let records = Arc::new(workload::preload());
    bulk_on_scopes(store, records.len(), concurrency, move |store, scopes, i| {
        let records = Arc::clone(&records);
        Box::pin(async move {
            let op = &records[i];
            store.put(&scopes[op.scope_index()], &op.key, write_of(op)).await.map(|_| 1)
        })
    })
    .await
}

/// Counts the live records of every benchmark scope by paging through it.
pub async fn count_bench_records(store: Arc<dyn MemoryStore>, concurrency: usize) -> BulkStats {
    let n = N_USERS * NAMESPACES.len();
    bulk_on_scopes(store, n, concurrency, move |store, scopes, i| {
        Box::pin(async move {
            let mut count = 0u64;
            let mut page = PageRequest::new(100);
            loop {
                let got = store.list(&scopes[i], page.clone()).await?;
                count += u64::try_from(got.items.len()).unwrap_or(0);
                match got.next_cursor {
                    Some(cursor) => page = page.after(cursor),
                    None => return Ok(count),
                }
            }
        })
    })
    .await
}

/// [`bulk`] with the store and the [`bench_scopes`] handed to every task.
async fn bulk_on_scopes<F>(
    store: Arc<dyn MemoryStore>,
    n: usize,
    concurrency: usize,
    task: F,
) -> BulkStats
where
    F: Fn(Arc<dyn MemoryStore>, Arc<Vec<MemoryScope>>, usize) -> Task + Send + Sync + 'static,
{
    let scopes = match bench_scopes() {
        Ok(scopes) => Arc::new(scopes),
        Err(err) => return failed(&err),
    };
    bulk(n, concurrency, move |i| task(Arc::clone(&store), Arc::clone(&scopes), i)).await
}

fn failed(err: &MemoryError) -> BulkStats {
    BulkStats { errors: 1, first_error: Some(describe(err)), ..BulkStats::default() }
}

/// Opens every pooled connection before timing: rounds of `concurrency` simultaneous reads, so
/// connection setup is not billed to the first phase.
pub async fn warm_up(store: Arc<dyn MemoryStore>, concurrency: usize) -> BulkStats {
    let scope = match MemoryScope::new(APP, workload::user_id(0)) {
        Ok(scope) => Arc::new(scope),
        Err(err) => return failed(&err),
    };
    bulk(concurrency * 8, concurrency, move |_| {
        let store = Arc::clone(&store);
        let scope = Arc::clone(&scope);
        Box::pin(async move { store.get(&scope, "warm-up").await.map(|_| 0) })
    })
    .await
}
