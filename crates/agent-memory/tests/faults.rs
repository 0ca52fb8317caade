//! Faults with nothing lost: acknowledged writes survive killed connections, server restarts
//! and a writer process killed with `SIGKILL`, and the stores recover without being restarted.
//!
//! - **PostgreSQL** (an owned server with durable settings) and **Redis** (an owned server with
//!   `appendonly yes`, `appendfsync always`): 16 tasks write through one store for a few seconds
//!   while a chaos task kills the store's connections and restarts the server. Every error must
//!   be `Storage`, every task must write again after its last error, and afterwards every
//!   acknowledged write must be present and intact when read through the same store.
//! - **SQLite**: a child process (this test binary, run again) writes with 16 tasks and prints
//!   each acknowledgement; the parent kills it with `SIGKILL` at a random moment, several rounds
//!   on the same file, then checks every acknowledged write of every round and the file's
//!   integrity.
//!
//! # What "present and intact" means
//!
//! Each key is written by one task only, one write at a time, and every write carries its own id
//! in its metadata (content and metadata are a function of the id), so the record found
//! afterwards names the write that produced it. A `Storage` error means the write may or may not
//! have committed, so for each key, with its writes in the order they were made:
//!
//! - the record found must be the key's **last acknowledged** write (same content, metadata and
//!   revision), or a write made **after** it that failed with `Storage` (it committed, the
//!   acknowledgement was lost); anything older means an acknowledged write was lost;
//! - a key with no acknowledged write may be absent, or hold one of its failed writes;
//! - each task's counter, incremented with compare-and-set, ends between the number of
//!   acknowledged increments and that plus the increments that failed with `Storage`.
//!
//! `cargo test --test faults -- --nocapture` prints the numbers of each run.
#![cfg(any(all(feature = "sqlite", unix), feature = "postgres", feature = "redis"))]

use serde_json::{json, Value};

/// The counter key of one task.
fn counter_key(task: usize) -> String {
    format!("t{task:02}-counter")
}

/// The content of a (non-counter) write: a function of the key and the write id.
fn data_content(key: &str, id: &str) -> String {
    format!("{key} written by {id}: {}", "payload ".repeat(12))
}

/// The id a record names in its metadata.
fn write_id_of(metadata: &agent_memory::Metadata) -> Option<&str> {
    metadata.get("write").and_then(Value::as_str)
}

fn data_metadata(id: &str, task: usize) -> Value {
    json!({ "write": id, "task": task })
}

fn counter_metadata(id: &str, task: usize, count: u64) -> Value {
    json!({ "write": id, "task": task, "count": count })
}

/// An error with its whole source chain, for failure messages.
fn chain(err: &agent_memory::MemoryError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

// ---------------------------------------------------------------------------------------------
// The load and its check, shared by the server-backed providers

#[cfg(any(feature = "postgres", feature = "redis"))]
mod load {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use agent_memory::{
        MemoryError, MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, PageRequest, Revision,
    };
    use serde_json::Value;

    use super::{chain, counter_key, counter_metadata, data_content, data_metadata, write_id_of};

    /// Writing tasks.
    pub const TASKS: usize = 16;
    /// Load that goes on writing this long after the last fault shows that the store recovered.
    pub const QUIET_END: Duration = Duration::from_millis(1500);
    /// A backstop: no load runs longer, whatever happens to the chaos task.
    const MAX_LOAD: Duration = Duration::from_secs(40);
    /// Pause after an error, so a task does not spin while the server is down.
    const ERROR_PAUSE: Duration = Duration::from_millis(20);

    /// One write as sent, and what came back.
    #[derive(Debug, Clone)]
    pub struct Attempt {
        pub id: String,
        pub content: String,
        pub metadata: Value,
        pub outcome: Outcome,
    }

    #[derive(Debug, Clone)]
    pub enum Outcome {
        /// The store returned the record: the write committed with this revision.
        Acked(Revision),
        /// `Storage`: the write may or may not have committed.
        Ambiguous,
        /// Any other error: per the contract nothing was written (and the test fails anyway).
        Refused,
    }

    /// What one task did.
    #[derive(Debug, Default)]
    pub struct TaskLog {
        pub task: usize,
        /// Every write, per key, in the order the task made them (the keys are this task's own).
        pub keys: BTreeMap<String, Vec<Attempt>>,
        pub acked_writes: u64,
        pub ambiguous_writes: u64,
        pub failed_reads: u64,
        pub counter_acked: u64,
        pub counter_ambiguous: u64,
        /// Storage errors by their fixed description.
        pub errors: BTreeMap<&'static str, u64>,
        /// Acknowledged writes since the task's last error.
        pub acked_since_last_error: u64,
        /// Errors other than `Storage`, and anything else that must fail the test.
        pub unexpected: Vec<String>,
    }

    impl TaskLog {
        /// Counts a `Storage` error; anything else is unexpected. True for `Storage`.
        fn error(&mut self, err: &MemoryError, doing: &str) -> bool {
            self.acked_since_last_error = 0;
            if let MemoryError::Storage { what, .. } = err {
                *self.errors.entry(what).or_default() += 1;
                true
            } else {
                self.unexpected.push(format!("task {}: {doing}: {}", self.task, chain(err)));
                false
            }
        }

        /// Records a write's outcome; checks that an acknowledged record echoes what was sent.
        fn write(
            &mut self,
            key: &str,
            id: String,
            content: String,
            metadata: Value,
            result: Result<MemoryRecord, MemoryError>,
        ) -> Option<MemoryRecord> {
            let (outcome, record) = match result {
                Ok(record) => {
                    if record.key != key
                        || record.content != content
                        || Value::Object(record.metadata.clone()) != metadata
                    {
                        self.unexpected.push(format!(
                            "task {}: put {key} ({id}) returned a record that is not the write",
                            self.task
                        ));
                    }
                    if let Some(previous) = self.keys.get(key).and_then(|a| last_acked(a)) {
                        if previous.1 == &record.revision {
                            self.unexpected.push(format!(
                                "task {}: put {key} ({id}) reused revision {}",
                                self.task, record.revision
                            ));
                        }
                    }
                    self.acked_writes += 1;
                    self.acked_since_last_error += 1;
                    (Outcome::Acked(record.revision.clone()), Some(record))
                }
                Err(err) => {
                    if self.error(&err, &format!("put {key} ({id})")) {
                        self.ambiguous_writes += 1;
                        (Outcome::Ambiguous, None)
                    } else {
                        (Outcome::Refused, None)
                    }
                }
            };
            self.keys.entry(key.to_owned()).or_default().push(Attempt {
                id,
                content,
                metadata,
                outcome,
            });
            record
        }
    }

    /// The position and revision of the last acknowledged write among `attempts`.
    fn last_acked(attempts: &[Attempt]) -> Option<(usize, &Revision)> {
        attempts.iter().enumerate().rev().find_map(|(at, attempt)| match &attempt.outcome {
            Outcome::Acked(revision) => Some((at, revision)),
            _ => None,
        })
    }

    /// Runs `TASKS` writing tasks against `store` until `stop` is set (or, as a backstop,
    /// `MAX_LOAD` has passed) and returns their logs.
    ///
    /// Each task cycles through three writes: a new key, an overwrite of that key, and a
    /// compare-and-set increment of its counter (read, then write with the revision read).
    pub fn spawn(
        store: &Arc<dyn MemoryStore>,
        scope: &MemoryScope,
        stop: &Arc<AtomicBool>,
    ) -> Vec<tokio::task::JoinHandle<TaskLog>> {
        let deadline = Instant::now() + MAX_LOAD;
        (0..TASKS)
            .map(|task| {
                let (store, scope, stop) = (Arc::clone(store), scope.clone(), Arc::clone(stop));
                tokio::spawn(async move {
                    run_task(store.as_ref(), &scope, task, &stop, deadline).await
                })
            })
            .collect()
    }

    async fn run_task(
        store: &dyn MemoryStore,
        scope: &MemoryScope,
        task: usize,
        stop: &AtomicBool,
        deadline: Instant,
    ) -> TaskLog {
        let mut log = TaskLog { task, ..TaskLog::default() };
        let counter = counter_key(task);
        // The highest count this task saw acknowledged: a later read below it lost a write.
        let mut acked_count = 0u64;
        let mut index = 0u64;
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            let (this, step) = (index, index % 3);
            index += 1;
            let id = format!("t{task:02}-i{this:06}");
            if step < 2 {
                let key = format!("t{task:02}-k{:05}", this / 3);
                let content = data_content(&key, &id);
                let metadata = data_metadata(&id, task);
                let write = MemoryWrite::new(content.clone()).metadata(metadata.clone());
                let result = store.put(scope, &key, write).await;
                let failed = result.is_err();
                log.write(&key, id, content, metadata, result);
                if failed {
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
                continue;
            }
            let current = match store.get(scope, &counter).await {
                Ok(current) => current,
                Err(err) => {
                    log.failed_reads += 1;
                    log.error(&err, "get the counter");
                    tokio::time::sleep(ERROR_PAUSE).await;
                    continue;
                }
            };
            let (count, write) = match current {
                None => (1, MemoryWrite::new("1").create_only()),
                Some(record) => {
                    let Ok(seen) = record.content.parse::<u64>() else {
                        log.unexpected
                            .push(format!("task {task}: counter holds {:?}", record.content));
                        continue;
                    };
                    if seen < acked_count {
                        log.unexpected.push(format!(
                            "task {task}: counter read {seen} after {acked_count} was \
                             acknowledged: an acknowledged increment was lost"
                        ));
                    }
                    (
                        seen + 1,
                        MemoryWrite::new((seen + 1).to_string()).expected_revision(record.revision),
                    )
                }
            };
            let metadata = counter_metadata(&id, task, count);
            let write = write.metadata(metadata.clone());
            let result = store.put(scope, &counter, write).await;
            match &result {
                Ok(_) => {
                    log.counter_acked += 1;
                    acked_count = count;
                }
                Err(err) if err.is_storage() => log.counter_ambiguous += 1,
                Err(_) => {}
            }
            let failed = result.is_err();
            log.write(&counter, id, count.to_string(), metadata, result);
            if failed {
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
        log
    }

    /// The numbers of one run.
    #[derive(Debug, Default)]
    pub struct Summary {
        pub acked_writes: u64,
        pub acked_keys: u64,
        pub present_keys: u64,
        pub ambiguous_writes: u64,
        /// Failed writes whose record was found afterwards: they had committed.
        pub ambiguous_committed: u64,
        /// Failed writes after a key's last acknowledged one that were found not to have
        /// committed.
        pub ambiguous_not_committed: u64,
        /// Failed writes followed by a later committed write to the same key: whether they
        /// committed is unknowable (and does not matter).
        pub ambiguous_superseded: u64,
        pub failed_reads: u64,
        pub storage_errors: u64,
        pub errors: BTreeMap<&'static str, u64>,
        pub counter_acked: u64,
        pub counter_ambiguous: u64,
        /// Increments that failed with `Storage` but are counted in the final values.
        pub counter_committed_unacked: u64,
        pub failures: Vec<String>,
    }

    impl Summary {
        pub fn line(&self) -> String {
            let errors: Vec<String> =
                self.errors.iter().map(|(what, n)| format!("{n}x \"{what}\"")).collect();
            format!(
                "acknowledged writes {} on {} keys; present and intact afterwards {}/{} keys; \
                 storage errors {} ({} writes, {} reads); ambiguous writes {} (found committed \
                 {}, found not committed {}, overwritten later so undeterminable {}); \
                 counter increments acknowledged {}, ambiguous {}, of which committed {}; \
                 errors seen: [{}]",
                self.acked_writes,
                self.acked_keys,
                self.present_keys,
                self.acked_keys,
                self.storage_errors,
                self.ambiguous_writes,
                self.failed_reads,
                self.ambiguous_writes,
                self.ambiguous_committed,
                self.ambiguous_not_committed,
                self.ambiguous_superseded,
                self.counter_acked,
                self.counter_ambiguous,
                self.counter_committed_unacked,
                errors.join(", ")
            )
        }

        /// Fails the test with every failure found.
        pub fn assert_nothing_lost(&self) {
            assert!(
                self.failures.is_empty(),
                "{} failures, first ones:\n{}",
                self.failures.len(),
                self.failures.iter().take(30).cloned().collect::<Vec<_>>().join("\n")
            );
        }
    }

    /// Lets the load run until `nominal` after `started`, and at least [`QUIET_END`] after
    /// the last fault (which has happened when this is called), then stops the tasks and
    /// checks what they acknowledged. Returns how long the load ran and the summary.
    pub async fn finish(
        store: &dyn MemoryStore,
        scope: &MemoryScope,
        stop: &AtomicBool,
        tasks: Vec<tokio::task::JoinHandle<TaskLog>>,
        started: Instant,
        nominal: Duration,
    ) -> (Duration, Summary) {
        let end = (started + nominal).max(Instant::now() + QUIET_END);
        tokio::time::sleep_until(end.into()).await;
        stop.store(true, Ordering::Relaxed);
        let load_time = started.elapsed();
        let mut logs = Vec::new();
        for task in tasks {
            logs.push(task.await.expect("a writing task"));
        }
        (load_time, verify(store, scope, &logs).await)
    }

    /// Checks the logs of a finished load against what the store holds now, reading only
    /// through `store` (which must therefore have recovered from the faults).
    pub async fn verify(store: &dyn MemoryStore, scope: &MemoryScope, logs: &[TaskLog]) -> Summary {
        let mut summary = Summary::default();
        for log in logs {
            summary.acked_writes += log.acked_writes;
            summary.ambiguous_writes += log.ambiguous_writes;
            summary.failed_reads += log.failed_reads;
            summary.counter_acked += log.counter_acked;
            summary.counter_ambiguous += log.counter_ambiguous;
            for (what, n) in &log.errors {
                *summary.errors.entry(what).or_default() += n;
                summary.storage_errors += n;
            }
            summary.failures.extend(log.unexpected.iter().cloned());
            if log.acked_writes == 0 {
                summary.failures.push(format!("task {} never got a write acknowledged", log.task));
            }
            if !log.errors.is_empty() && log.acked_since_last_error == 0 {
                summary.failures.push(format!(
                    "task {} got no write acknowledged after its last error: the store did not \
                     recover",
                    log.task
                ));
            }
        }

        // Everything in the scope, through the same store: every page must succeed.
        let attempted: usize = logs.iter().map(|log| log.keys.len()).sum();
        let mut stored: HashMap<String, MemoryRecord> = HashMap::new();
        let mut page = PageRequest::new(100);
        for _ in 0..=(attempted / 100 + 2) {
            let result = match store.list(scope, page.clone()).await {
                Ok(result) => result,
                Err(err) => {
                    summary.failures.push(format!("list after the faults failed: {}", chain(&err)));
                    return summary;
                }
            };
            for record in result.items {
                stored.insert(record.key.clone(), record);
            }
            match result.next_cursor {
                Some(cursor) => page = PageRequest::new(100).after(cursor),
                None => break,
            }
        }
        let known: usize =
            stored.keys().filter(|k| logs.iter().any(|l| l.keys.contains_key(*k))).count();
        if known != stored.len() {
            summary
                .failures
                .push(format!("{} stored keys were never written", stored.len() - known));
        }

        for log in logs {
            for (key, attempts) in &log.keys {
                let mut record = stored.get(key).cloned();
                if record.is_none() {
                    // Not listed: confirm with a get, which must succeed too.
                    match store.get(scope, key).await {
                        Ok(Some(found)) => {
                            summary
                                .failures
                                .push(format!("{key} is missing from list but get finds it"));
                            record = Some(found);
                        }
                        Ok(None) => {}
                        Err(err) => {
                            summary.failures.push(format!(
                                "get {key} after the faults failed: {}",
                                chain(&err)
                            ));
                            continue;
                        }
                    }
                }
                check_key(&mut summary, scope, key, attempts, record.as_ref());
            }
            let counter = counter_key(log.task);
            if let Some(record) = stored.get(&counter) {
                match record.content.parse::<u64>() {
                    Ok(count) => {
                        let (acked, ambiguous) = (log.counter_acked, log.counter_ambiguous);
                        if count < acked || count > acked + ambiguous {
                            summary.failures.push(format!(
                                "{counter} is {count}, expected {acked} acknowledged increments \
                                 plus at most {ambiguous} ambiguous ones"
                            ));
                        } else {
                            summary.counter_committed_unacked += count - acked;
                        }
                    }
                    Err(_) => summary.failures.push(format!("{counter} is not a number")),
                }
            } else if log.counter_acked > 0 {
                summary.failures.push(format!("{counter} is missing"));
            }
        }
        summary
    }

    /// Checks one key's record against the writes made to it.
    fn check_key(
        summary: &mut Summary,
        scope: &MemoryScope,
        key: &str,
        attempts: &[Attempt],
        record: Option<&MemoryRecord>,
    ) {
        let acked = last_acked(attempts);
        if acked.is_some() {
            summary.acked_keys += 1;
        }
        // Failed writes before the last acknowledged one were overwritten by it either way.
        let cut = acked.map_or(0, |(at, _)| at);
        summary.ambiguous_superseded += attempts[..cut]
            .iter()
            .filter(|a| matches!(a.outcome, Outcome::Ambiguous))
            .count()
            .try_into()
            .unwrap_or(u64::MAX);
        let trailing: u64 = attempts[cut..]
            .iter()
            .filter(|a| matches!(a.outcome, Outcome::Ambiguous))
            .count()
            .try_into()
            .unwrap_or(u64::MAX);
        let Some(record) = record else {
            if let Some((at, _)) = acked {
                summary.failures.push(format!(
                    "{key}: acknowledged write {} is lost (the key is absent)",
                    attempts[at].id
                ));
            } else {
                summary.ambiguous_not_committed += trailing;
            }
            return;
        };
        let Some(found_at) =
            write_id_of(&record.metadata).and_then(|id| attempts.iter().position(|a| a.id == id))
        else {
            summary.failures.push(format!("{key}: the record names no write made to this key"));
            return;
        };
        let found = &attempts[found_at];
        if record.content != found.content
            || Value::Object(record.metadata.clone()) != found.metadata
            || record.key != key
            || &record.scope != scope
        {
            summary.failures.push(format!("{key}: the record of write {} is not intact", found.id));
            return;
        }
        match (acked, &found.outcome) {
            (Some((at, revision)), _) if found_at == at => {
                if &record.revision != revision {
                    summary.failures.push(format!(
                        "{key}: write {} was acknowledged with revision {revision} but holds {}",
                        found.id, record.revision
                    ));
                    return;
                }
                summary.ambiguous_not_committed += trailing;
            }
            (Some((at, _)), _) if found_at < at => {
                summary.failures.push(format!(
                    "{key}: holds write {} but write {} was acknowledged after it: an \
                     acknowledged write is lost",
                    found.id, attempts[at].id
                ));
                return;
            }
            (_, Outcome::Ambiguous) => {
                // A failed write after the last acknowledged one committed; later ones did not.
                summary.ambiguous_committed += 1;
                let later = attempts[found_at + 1..]
                    .iter()
                    .filter(|a| matches!(a.outcome, Outcome::Ambiguous))
                    .count()
                    .try_into()
                    .unwrap_or(u64::MAX);
                summary.ambiguous_not_committed += later;
                // Those between the acknowledged write and this one are unknowable.
                summary.ambiguous_superseded += trailing - later - 1;
            }
            (_, outcome) => {
                summary
                    .failures
                    .push(format!("{key}: holds write {} whose outcome was {outcome:?}", found.id));
                return;
            }
        }
        if acked.is_some() {
            summary.present_keys += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

#[cfg(feature = "postgres")]
mod pg_faults {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use agent_memory::{MemoryScope, MemoryStore, PostgresMemoryStore};
    use agent_memory_testkit::postgres::PostgresServer;
    use tokio_postgres::NoTls;

    use super::load;

    /// The store's `application_name`, by which the chaos task finds its backends.
    const STORE_APP: &str = "agent_memory_faults";
    /// How long the tasks write at least; faults are scheduled within it.
    const LOAD: Duration = Duration::from_secs(9);

    #[derive(Debug, Clone, Copy)]
    enum Fault {
        /// `pg_terminate_backend` of every backend of the store.
        Kill,
        /// Fast shutdown and start.
        Restart,
        /// Immediate shutdown (crash recovery on start) and start.
        CrashRestart,
    }

    /// When each fault happens, from the start of the load.
    const SCHEDULE: &[(u64, Fault)] = &[
        (700, Fault::Kill),
        (1400, Fault::Kill),
        (2200, Fault::Restart),
        (3600, Fault::Kill),
        (4300, Fault::CrashRestart),
        (5900, Fault::Kill),
        (6600, Fault::Kill),
        (7200, Fault::Kill),
    ];

    #[derive(Debug, Default)]
    struct ChaosReport {
        killed: Vec<i64>,
        restarts: u32,
        crash_restarts: u32,
        skipped: u32,
        log: Vec<String>,
    }

    /// Terminates every backend of the store from a fresh admin connection; returns how many.
    async fn terminate_store_backends(url: &str) -> Result<i64, String> {
        let (client, connection) =
            tokio_postgres::connect(url, NoTls).await.map_err(|e| format!("connect: {e}"))?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = $1 AND pid <> pg_backend_pid()",
                &[&STORE_APP],
            )
            .await
            .map_err(|e| format!("terminate: {e}"))?;
        drop(client);
        let _ = driver.await;
        Ok(row.get(0))
    }

    async fn chaos(server: PostgresServer, started: Instant) -> (PostgresServer, ChaosReport) {
        let admin_url = format!("{}?connect_timeout=3", server.url());
        let mut server = Some(server);
        let mut report = ChaosReport::default();
        for &(at_ms, fault) in SCHEDULE {
            tokio::time::sleep_until((started + Duration::from_millis(at_ms)).into()).await;
            let at = started.elapsed();
            // A fault running late (after a slow restart) is dropped near the end of the
            // load, so the run stays short.
            if at + load::QUIET_END > LOAD {
                report.skipped += 1;
                continue;
            }
            match fault {
                Fault::Kill => match terminate_store_backends(&admin_url).await {
                    Ok(n) => {
                        report.killed.push(n);
                        report.log.push(format!("{:.1}s kill {n}", at.as_secs_f64()));
                    }
                    Err(e) => report.log.push(format!("{:.1}s kill failed: {e}", at.as_secs_f64())),
                },
                Fault::Restart | Fault::CrashRestart => {
                    let mut owned = server.take().expect("the server is here between faults");
                    let crash = matches!(fault, Fault::CrashRestart);
                    owned = tokio::task::spawn_blocking(move || {
                        if crash {
                            owned.crash_restart();
                        } else {
                            owned.restart();
                        }
                        owned
                    })
                    .await
                    .expect("the server restarts");
                    server = Some(owned);
                    let took = started.elapsed() - at;
                    let name = if crash { "crash restart" } else { "restart" };
                    report.log.push(format!(
                        "{:.1}s {name} ({:.1}s)",
                        at.as_secs_f64(),
                        took.as_secs_f64()
                    ));
                    if crash {
                        report.crash_restarts += 1;
                    } else {
                        report.restarts += 1;
                    }
                }
            }
        }
        (server.expect("the server is back"), report)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_keeps_every_acknowledged_write_through_killed_connections_and_restarts() {
        let server = PostgresServer::start_durable();
        let url = format!("{}?application_name={STORE_APP}", server.url());
        let store = PostgresMemoryStore::builder(&url)
            .expect("a valid URL")
            .max_connections(16)
            .min_connections(4)
            .connect_timeout(Duration::from_secs(3))
            .acquire_timeout(Duration::from_secs(5))
            .build()
            .expect("a valid configuration");
        store.start().await.expect("start");
        let store: Arc<dyn MemoryStore> = Arc::new(store);
        let app = format!("faults-{}", uuid::Uuid::new_v4().simple());
        let scope = MemoryScope::new(app, "user").expect("valid ids");

        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = load::spawn(&store, &scope, &stop);
        let (server, report) = tokio::spawn(chaos(server, started)).await.expect("the chaos task");
        let (load_time, summary) =
            load::finish(store.as_ref(), &scope, &stop, tasks, started, LOAD).await;
        eprintln!(
            "postgres faults: {} tasks for {:.1}s; chaos: {} (backends killed {:?}, restarts {}, \
             crash restarts {}, skipped {})\npostgres faults: {}",
            load::TASKS,
            load_time.as_secs_f64(),
            report.log.join(", "),
            report.killed,
            report.restarts,
            report.crash_restarts,
            report.skipped,
            summary.line()
        );
        summary.assert_nothing_lost();
        assert!(report.killed.iter().sum::<i64>() > 0, "the chaos killed no backend");
        assert!(report.restarts + report.crash_restarts >= 1, "the server never restarted");
        assert!(summary.storage_errors > 0, "the faults never reached the store");
        assert!(summary.acked_keys >= 16 && summary.counter_acked >= 16, "too little load");
        store.close().await.expect("close");
        drop(server);
    }
}

// ---------------------------------------------------------------------------------------------
// Redis

#[cfg(feature = "redis")]
mod redis_faults {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use agent_memory::{MemoryScope, MemoryStore, RedisMemoryStore};
    use agent_memory_testkit::redis::RedisServer;

    use super::load;

    /// How long the tasks write at least; faults are scheduled within it.
    const LOAD: Duration = Duration::from_secs(8);

    #[derive(Debug, Clone, Copy)]
    enum Fault {
        /// `CLIENT KILL TYPE normal SKIPME yes`: every client but the one asking.
        Kill,
        /// SIGKILL the server and start it again on the same port, directory and arguments.
        Restart,
    }

    const SCHEDULE: &[(u64, Fault)] = &[
        (600, Fault::Kill),
        (1200, Fault::Kill),
        (2000, Fault::Restart),
        (3200, Fault::Kill),
        (4000, Fault::Restart),
        (5200, Fault::Kill),
        (5800, Fault::Kill),
        (6400, Fault::Kill),
    ];

    #[derive(Debug, Default)]
    struct ChaosReport {
        killed: Vec<u64>,
        restarts: u32,
        skipped: u32,
        log: Vec<String>,
    }

    async fn chaos(server: RedisServer, started: Instant) -> (RedisServer, ChaosReport) {
        let mut server = Some(server);
        let mut report = ChaosReport::default();
        for &(at_ms, fault) in SCHEDULE {
            tokio::time::sleep_until((started + Duration::from_millis(at_ms)).into()).await;
            let at = started.elapsed();
            // A fault running late (after a slow restart) is dropped near the end of the
            // load, so the run stays short.
            if at + load::QUIET_END > LOAD {
                report.skipped += 1;
                continue;
            }
            let owned = server.take().expect("the server is here between faults");
            let (owned, note) = tokio::task::spawn_blocking(move || {
                let mut owned = owned;
                let note = match fault {
                    Fault::Kill => {
                        owned.cli(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"])
                    }
                    Fault::Restart => {
                        owned.restart();
                        "restart".to_owned()
                    }
                };
                (owned, note)
            })
            .await
            .expect("the fault ran");
            server = Some(owned);
            match fault {
                Fault::Kill => match note.parse::<u64>() {
                    Ok(n) => {
                        report.killed.push(n);
                        report.log.push(format!("{:.1}s kill {n}", at.as_secs_f64()));
                    }
                    Err(_) => {
                        report.log.push(format!("{:.1}s kill said {note:?}", at.as_secs_f64()))
                    }
                },
                Fault::Restart => {
                    report.restarts += 1;
                    let took = started.elapsed() - at;
                    report.log.push(format!(
                        "{:.1}s restart ({:.1}s)",
                        at.as_secs_f64(),
                        took.as_secs_f64()
                    ));
                }
            }
        }
        (server.expect("the server is back"), report)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_keeps_every_acknowledged_write_through_killed_connections_and_restarts() {
        let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
        let store = RedisMemoryStore::builder(&server.url())
            .expect("a valid URL")
            .require_durable(true)
            .response_timeout(Duration::from_secs(3))
            .connect_timeout(Duration::from_secs(2))
            .build()
            .expect("valid options");
        store.start().await.expect("start on a durable server");
        let store: Arc<dyn MemoryStore> = Arc::new(store);
        let app = format!("faults-{}", uuid::Uuid::new_v4().simple());
        let scope = MemoryScope::new(app, "user").expect("valid ids");

        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = load::spawn(&store, &scope, &stop);
        let (server, report) = tokio::spawn(chaos(server, started)).await.expect("the chaos task");
        let (load_time, summary) =
            load::finish(store.as_ref(), &scope, &stop, tasks, started, LOAD).await;
        eprintln!(
            "redis faults: {} tasks for {:.1}s; chaos: {} (clients killed {:?}, restarts {}, \
             skipped {})\nredis faults: {}",
            load::TASKS,
            load_time.as_secs_f64(),
            report.log.join(", "),
            report.killed,
            report.restarts,
            report.skipped,
            summary.line()
        );
        summary.assert_nothing_lost();
        assert!(report.killed.iter().sum::<u64>() > 0, "the chaos killed no connection");
        assert!(report.restarts >= 1, "the server never restarted");
        assert!(summary.storage_errors > 0, "the faults never reached the store");
        assert!(summary.acked_keys >= 16 && summary.counter_acked >= 16, "too little load");
        store.close().await.expect("close");
        drop(server);
    }
}

// ---------------------------------------------------------------------------------------------
// SQLite

#[cfg(all(feature = "sqlite", unix))]
mod sqlite_faults {
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::ExitStatusExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use agent_memory::sqlite::SqliteMemoryStore;
    use agent_memory::{MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, PageRequest};
    use serde_json::Value;

    use super::{chain, counter_key, counter_metadata, data_content, data_metadata, write_id_of};

    /// A random number from the operating system's entropy (through a v4 UUID).
    fn random_u64() -> u64 {
        uuid::Uuid::new_v4().as_u64_pair().0
    }

    const TEST_NAME: &str =
        "sqlite_faults::sqlite_keeps_every_acknowledged_write_through_repeated_sigkill";
    const ROLE_VAR: &str = "AGENT_MEMORY_FAULTS_ROLE";
    const FILE_VAR: &str = "AGENT_MEMORY_FAULTS_FILE";
    const ROUND_VAR: &str = "AGENT_MEMORY_FAULTS_ROUND";
    const TASKS: usize = 16;
    const ROUNDS: u32 = 5;
    /// The kill comes this long after the child is spawned, at random in this range.
    const KILL_AFTER_MS: (u64, u64) = (15, 1400);
    /// A writer that is never killed stops by itself after this long (and fails the test).
    const WRITER_LIFETIME: Duration = Duration::from_secs(30);

    fn scope() -> MemoryScope {
        MemoryScope::new("faults", "sigkill").expect("valid ids")
    }

    /// Which write: round, task and the task's operation index. Ordered as they happen within
    /// one task.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    struct WriteId {
        round: u32,
        task: usize,
        index: u64,
    }

    impl WriteId {
        fn text(&self) -> String {
            format!("r{}-t{:02}-i{:06}", self.round, self.task, self.index)
        }

        fn parse(text: &str) -> Option<Self> {
            let mut parts = text.split('-');
            let round = parts.next()?.strip_prefix('r')?.parse().ok()?;
            let task = parts.next()?.strip_prefix('t')?.parse().ok()?;
            let index = parts.next()?.strip_prefix('i')?.parse().ok()?;
            parts.next().is_none().then_some(Self { round, task, index })
        }

        /// The key this write goes to: every third write increments the task's counter, the
        /// other two create and then overwrite a key of their own.
        fn key(&self) -> String {
            if self.index % 3 == 2 {
                counter_key(self.task)
            } else {
                format!("r{}-t{:02}-k{:05}", self.round, self.task, self.index / 3)
            }
        }

        fn is_counter(&self) -> bool {
            self.index % 3 == 2
        }
    }

    /// One acknowledgement line: `ack KEY REVISION WRITE-ID COUNT` (`-` for no count).
    #[derive(Debug, Clone)]
    struct Ack {
        key: String,
        revision: String,
        id: WriteId,
        count: Option<u64>,
    }

    fn parse_ack(line: &str) -> Option<Ack> {
        let mut words = line.strip_prefix("ack ")?.split(' ');
        let key = words.next()?.to_owned();
        let revision = words.next()?.to_owned();
        let id = WriteId::parse(words.next()?)?;
        let count = match words.next()? {
            "-" => None,
            n => Some(n.parse().ok()?),
        };
        words.next().is_none().then_some(Ack { key, revision, id, count })
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime")
    }

    /// Prints one line to the real stdout at once.
    fn say(line: &str) {
        let mut out = std::io::stdout().lock();
        out.write_all(format!("{line}\n").as_bytes()).expect("stdout is writable");
        out.flush().expect("stdout flushes");
    }

    /// Reports an error of the writer to the parent and ends the process at once (a panic
    /// in one task would leave the others writing until the kill, unnoticed).
    fn die(what: &str) -> ! {
        say(&format!("error {what}"));
        std::process::exit(3)
    }

    /// The child: 16 tasks writing until killed, each printing an acknowledgement once its
    /// `put` returned. Any error ends it (the parent then sees an exit instead of a kill).
    async fn writer(path: &Path, round: u32) {
        let store = Arc::new(SqliteMemoryStore::new(path));
        store.start().await.unwrap_or_else(|e| die(&format!("start: {}", chain(&e))));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for task in 0..TASKS {
            let store = Arc::clone(&store);
            tasks.push(tokio::spawn(async move {
                let s = scope();
                let mut index = 0u64;
                while started.elapsed() < WRITER_LIFETIME {
                    let id = WriteId { round, task, index };
                    let (key, text) = (id.key(), id.text());
                    index += 1;
                    let (write, count) = if id.is_counter() {
                        let current = store
                            .get(&s, &key)
                            .await
                            .unwrap_or_else(|e| die(&format!("get {key}: {}", chain(&e))));
                        let (count, write) = match current {
                            None => (1, MemoryWrite::new("1").create_only()),
                            Some(record) => {
                                let seen: u64 = record
                                    .content
                                    .parse()
                                    .unwrap_or_else(|_| die(&format!("{key} is not a count")));
                                let write = MemoryWrite::new((seen + 1).to_string())
                                    .expected_revision(record.revision);
                                (seen + 1, write)
                            }
                        };
                        (write.metadata(counter_metadata(&text, task, count)), Some(count))
                    } else {
                        let write = MemoryWrite::new(data_content(&key, &text))
                            .metadata(data_metadata(&text, task));
                        (write, None)
                    };
                    let record = store
                        .put(&s, &key, write)
                        .await
                        .unwrap_or_else(|e| die(&format!("put {key}: {}", chain(&e))));
                    let count = count.map_or_else(|| "-".to_owned(), |n| n.to_string());
                    say(&format!("ack {key} {} {text} {count}", record.revision));
                }
            }));
        }
        for task in tasks {
            task.await.expect("a writing task");
        }
    }

    /// One round: spawn the writer, kill it with SIGKILL after `delay`, return its acks.
    fn round(path: &Path, round: u32, delay: Duration) -> Vec<Ack> {
        let mut child = Command::new(std::env::current_exe().expect("the test binary's path"))
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1", "--quiet"])
            .env(ROLE_VAR, "writer")
            .env(FILE_VAR, path)
            .env(ROUND_VAR, round.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the test binary starts again as a writer");
        let spawned = Instant::now();
        let stdout = child.stdout.take().expect("piped stdout");
        let reader = std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let (mut acks, mut errors) = (Vec::new(), Vec::new());
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break, // the pipe closed: the writer is gone
                    Ok(_) => {}
                }
                // A line cut short by the kill (no newline) is not an acknowledgement.
                if let Some(ack) = line.strip_suffix('\n').and_then(parse_ack) {
                    acks.push(ack);
                } else if let Some(error) = line.strip_prefix("error ") {
                    errors.push(error.trim_end().to_owned());
                }
            }
            (acks, errors)
        });
        std::thread::sleep(delay.saturating_sub(spawned.elapsed()));
        child.kill().expect("SIGKILL the writer");
        let status = child.wait().expect("the writer is reaped");
        let (acks, errors) = reader.join().expect("the reader thread");
        assert!(errors.is_empty(), "round {round}: the writer failed: {errors:?}");
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round}: the writer must die by SIGKILL, not end by itself: {status}"
        );
        acks
    }

    fn integrity_check(path: &Path) -> String {
        let conn = rusqlite::Connection::open(path).expect("open for an integrity check");
        conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("integrity check")
    }

    #[test]
    fn sqlite_keeps_every_acknowledged_write_through_repeated_sigkill() {
        if let (Ok(role), Some(file), Ok(n)) = (
            std::env::var(ROLE_VAR),
            std::env::var_os(FILE_VAR),
            std::env::var(ROUND_VAR).map(|r| r.parse::<u32>()),
        ) {
            assert_eq!(role, "writer");
            runtime().block_on(writer(&PathBuf::from(file), n.expect("a round number")));
            return;
        }
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("killed.db");
        let mut acks = Vec::new();
        let mut per_round = Vec::new();
        for r in 0..ROUNDS {
            let span = KILL_AFTER_MS.1 - KILL_AFTER_MS.0;
            let delay = Duration::from_millis(KILL_AFTER_MS.0 + random_u64() % span);
            let got = round(&path, r, delay);
            // Each reopen recovers the log the killed writer left; the file stays consistent.
            let check = integrity_check(&path);
            assert_eq!(check, "ok", "integrity check after round {r}");
            per_round.push(format!("{}ms: {} acks", delay.as_millis(), got.len()));
            acks.extend(got);
        }

        let (report, failures) = runtime().block_on(verify(&path, &acks));
        let check = integrity_check(&path);
        eprintln!(
            "sqlite faults: {ROUNDS} rounds of {TASKS} writer tasks killed with SIGKILL after \
             [{}]\nsqlite faults: {report}; integrity_check {check}",
            per_round.join(", ")
        );
        assert!(
            failures.is_empty(),
            "{} failures, first ones:\n{}",
            failures.len(),
            failures.iter().take(30).cloned().collect::<Vec<_>>().join("\n")
        );
        assert_eq!(check, "ok");
        assert!(acks.len() >= 100, "only {} writes were acknowledged in all", acks.len());
    }

    /// Reopens the file and checks every acknowledged write; returns the summary line and the
    /// failures.
    async fn verify(path: &Path, acks: &[Ack]) -> (String, Vec<String>) {
        let mut failures = Vec::new();
        let store = SqliteMemoryStore::new(path);
        store.start().await.expect("reopen after the last kill");
        let s = scope();
        let mut stored: HashMap<String, MemoryRecord> = HashMap::new();
        let mut page = PageRequest::new(100);
        for _ in 0..=(acks.len() / 100 + 200) {
            let result = store.list(&s, page.clone()).await.expect("list");
            stored.extend(result.items.into_iter().map(|r| (r.key.clone(), r)));
            match result.next_cursor {
                Some(cursor) => page = PageRequest::new(100).after(cursor),
                None => break,
            }
        }

        let acked_ids: HashMap<WriteId, &Ack> = acks.iter().map(|a| (a.id, a)).collect();
        if acked_ids.len() != acks.len() {
            failures.push("a write was acknowledged twice".to_owned());
        }
        let mut last_per_key: HashMap<&str, &Ack> = HashMap::new();
        let mut last_per_task: HashMap<(u32, usize), u64> = HashMap::new();
        for ack in acks {
            if ack.key != ack.id.key() || ack.count.is_some() != ack.id.is_counter() {
                failures.push(format!("malformed acknowledgement {ack:?}"));
            }
            let last = last_per_key.entry(&ack.key).or_insert(ack);
            if last.id < ack.id {
                *last = ack;
            }
            let task = last_per_task.entry((ack.id.round, ack.id.task)).or_insert(ack.id.index);
            *task = (*task).max(ack.id.index);
        }

        // Every acknowledged key holds its last acknowledged write, or the one write its task
        // had in flight when it was killed.
        let mut in_flight_committed = 0u64;
        let mut present: HashSet<&str> = HashSet::new();
        for (key, last) in &last_per_key {
            let Some(record) = stored.get(*key) else {
                failures.push(format!("{key}: acknowledged write {} is lost", last.id.text()));
                continue;
            };
            let Some(found) = write_id_of(&record.metadata).and_then(WriteId::parse) else {
                failures.push(format!("{key}: the record names no write"));
                continue;
            };
            if found == last.id {
                if record.revision.as_str() != last.revision {
                    failures.push(format!(
                        "{key}: acknowledged with revision {} but holds {}",
                        last.revision, record.revision
                    ));
                    continue;
                }
            } else if found < last.id {
                failures.push(format!(
                    "{key}: holds write {} but {} was acknowledged after it",
                    found.text(),
                    last.id.text()
                ));
                continue;
            }
            present.insert(key);
        }

        // Every record found: intact, and either acknowledged or the one write in flight.
        for (key, record) in &stored {
            let Some(id) = write_id_of(&record.metadata).and_then(WriteId::parse) else {
                failures.push(format!("{key}: the record names no write"));
                continue;
            };
            let text = id.text();
            let intact = if id.is_counter() {
                let count = record.content.parse::<u64>().ok();
                count.is_some_and(|n| {
                    Value::Object(record.metadata.clone()) == counter_metadata(&text, id.task, n)
                })
            } else {
                record.content == data_content(key, &text)
                    && Value::Object(record.metadata.clone()) == data_metadata(&text, id.task)
            };
            if id.key() != *key || !intact || record.scope != s {
                present.remove(key.as_str());
                failures.push(format!("{key}: the record of write {text} is not intact"));
                continue;
            }
            if let Some(ack) = acked_ids.get(&id) {
                if ack.count.is_some_and(|n| n.to_string() != record.content) {
                    present.remove(key.as_str());
                    failures.push(format!("{key}: holds a count other than acknowledged"));
                }
                continue;
            }
            let in_flight = last_per_task.get(&(id.round, id.task)).map_or(0, |last| last + 1);
            if id.index != in_flight {
                failures.push(format!(
                    "{key}: holds unacknowledged write {text}, but only write {in_flight} of that \
                     task was in flight when it was killed"
                ));
                continue;
            }
            in_flight_committed += 1;
        }

        // Counters: acknowledged counts strictly increase across rounds, and the final count
        // lies between the acknowledged increments and that plus one in-flight one per round.
        let mut counter_acked = 0u64;
        let mut counter_committed_unacked = 0u64;
        for task in 0..TASKS {
            let key = counter_key(task);
            let mut counts: BTreeMap<WriteId, u64> = BTreeMap::new();
            for ack in acks.iter().filter(|a| a.key == key) {
                counts.insert(ack.id, ack.count.unwrap_or_default());
            }
            let sequence: Vec<u64> = counts.values().copied().collect();
            if sequence.windows(2).any(|w| w[0] >= w[1]) {
                failures.push(format!(
                    "{key}: acknowledged counts do not increase: an increment was lost"
                ));
            }
            let acked = u64::try_from(sequence.len()).expect("a count");
            counter_acked += acked;
            let Some(final_count) = stored.get(&key).and_then(|r| r.content.parse::<u64>().ok())
            else {
                if acked > 0 {
                    failures.push(format!("{key} is missing"));
                }
                continue;
            };
            if final_count < acked || final_count > acked + u64::from(ROUNDS) {
                failures
                    .push(format!("{key} is {final_count} after {acked} acknowledged increments"));
            } else {
                counter_committed_unacked += final_count - acked;
            }
        }
        let distinct: HashSet<&str> = last_per_key.keys().copied().collect();
        store.close().await.expect("close");
        let report = format!(
            "acknowledged writes {} on {} keys (counter increments {}); present and intact \
             afterwards {}/{} keys; unacknowledged in-flight writes found committed \
             {in_flight_committed} (counter increments {counter_committed_unacked}); records \
             in the file {}; errors seen 0 (the writer stops at any error)",
            acks.len(),
            distinct.len(),
            counter_acked,
            present.len(),
            distinct.len(),
            stored.len()
        );
        (report, failures)
    }
}
