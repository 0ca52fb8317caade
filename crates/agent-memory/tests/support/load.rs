//! The load and its check, shared by the server-backed providers' fault tests
//! (`faults_postgres.rs`, `faults_redis.rs`): 16 tasks write through one store while a chaos
//! task disturbs its server on one schedule of faults, each test saying how its server is
//! killed and restarted, then every acknowledged write is checked through the same store (see
//! [`super::faults`] for what "present and intact" means).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::{
    MemoryError, MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, PageRequest, Revision,
};
use serde_json::Value;

use super::errors::chain;
use super::faults::{counter_key, counter_metadata, data_content, data_metadata, write_id_of};

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
            tokio::spawn(
                async move { run_task(store.as_ref(), &scope, task, &stop, deadline).await },
            )
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
                    log.unexpected.push(format!("task {task}: counter holds {:?}", record.content));
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

/// Sleeps until `offset` after `started`, the moment of one scheduled fault, and returns how
/// long the load has run by then; `None` when that is too close to the end of a load of
/// `nominal` length (a fault running late, after a slow restart), so the caller drops the
/// fault and the run stays short.
pub async fn fault_time(started: Instant, offset: Duration, nominal: Duration) -> Option<Duration> {
    tokio::time::sleep_until((started + offset).into()).await;
    let at = started.elapsed();
    (at + QUIET_END <= nominal).then_some(at)
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
        summary.failures.push(format!("{} stored keys were never written", stored.len() - known));
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
                        summary
                            .failures
                            .push(format!("get {key} after the faults failed: {}", chain(&err)));
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

/// What the chaos task did to the server.
#[derive(Debug, Default)]
pub struct ChaosReport {
    /// The connections each kill ended.
    pub killed: Vec<u64>,
    pub restarts: u32,
    pub crash_restarts: u32,
    /// Faults dropped because they came too close to the end of the load.
    pub skipped: u32,
    pub log: Vec<String>,
}

/// What the chaos task does to the server at one point of the load.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Kill every connection of the store; the server stays up.
    Kill,
    /// Stop the server cleanly and start it again (as by a crash where the test server can
    /// stop no other way).
    Restart,
    /// Stop the server as by a crash, nothing flushed or released on the way down, and start
    /// it again.
    CrashRestart,
}

/// When each fault happens, in thousandths of the nominal load from its start, for every
/// provider: kills before, between and after two restarts, the second as by a crash, the last
/// fault early enough for [`QUIET_END`] of load to follow it.
pub const SCHEDULE: &[(u32, Fault)] = &[
    (75, Fault::Kill),
    (150, Fault::Kill),
    (250, Fault::Restart),
    (400, Fault::Kill),
    (500, Fault::CrashRestart),
    (650, Fault::Kill),
    (725, Fault::Kill),
    (800, Fault::Kill),
];

/// What one fault did.
pub enum Done {
    /// Connections killed: how many, or why that failed.
    Killed(Result<u64, String>),
    /// The server was restarted; `crash` when it was stopped as by a crash.
    Restarted { crash: bool },
}

/// Applies each fault of [`SCHEDULE`], timed against a load of `nominal` length from
/// `started` (see [`fault_time`]), with `apply`, which is lent the server and gives it back;
/// returns the server and the report.
pub async fn chaos<S, Fut>(
    mut server: S,
    started: Instant,
    nominal: Duration,
    mut apply: impl FnMut(S, Fault) -> Fut,
) -> (S, ChaosReport)
where
    Fut: std::future::Future<Output = (S, Done)>,
{
    let mut report = ChaosReport::default();
    for &(permille, fault) in SCHEDULE {
        let Some(at) = fault_time(started, nominal * permille / 1000, nominal).await else {
            report.skipped += 1;
            continue;
        };
        let (back, done) = apply(server, fault).await;
        server = back;
        let at_s = at.as_secs_f64();
        match done {
            Done::Killed(Ok(n)) => {
                report.killed.push(n);
                report.log.push(format!("{at_s:.1}s kill {n}"));
            }
            Done::Killed(Err(e)) => report.log.push(format!("{at_s:.1}s kill failed: {e}")),
            Done::Restarted { crash } => {
                let took = started.elapsed() - at;
                let name = if crash { "crash restart" } else { "restart" };
                report.log.push(format!("{at_s:.1}s {name} ({:.1}s)", took.as_secs_f64()));
                if crash {
                    report.crash_restarts += 1;
                } else {
                    report.restarts += 1;
                }
            }
        }
    }
    (server, report)
}

/// Starts `store`, runs the load through it for `nominal` while a chaos task applies the
/// [`SCHEDULE`] to its server with `apply` (see [`chaos`]), prints the numbers of the run
/// under `provider`'s name, and checks that nothing acknowledged was lost, that the faults
/// reached the store and that the load was real; then closes the store and stops the server.
pub async fn run_under_chaos<S, F, Fut>(
    provider: &str,
    store: Arc<dyn MemoryStore>,
    nominal: Duration,
    server: S,
    apply: F,
) where
    S: Send + 'static,
    F: FnMut(S, Fault) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = (S, Done)> + Send + 'static,
{
    store.start().await.unwrap_or_else(|e| panic!("{provider}: the store must start: {e:?}"));
    let app = format!("faults-{}", uuid::Uuid::new_v4().simple());
    let scope = MemoryScope::new(app, "user").expect("valid ids");
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = spawn(&store, &scope, &stop);
    let chaos = chaos(server, started, nominal, apply);
    let (server, report) = tokio::spawn(chaos).await.expect("the chaos task");
    let (load_time, summary) = finish(store.as_ref(), &scope, &stop, tasks, started, nominal).await;
    eprintln!(
        "{provider} faults: {TASKS} tasks for {:.1}s; chaos: {} (connections killed {:?}, \
         restarts {}, crash restarts {}, skipped {})\n{provider} faults: {}",
        load_time.as_secs_f64(),
        report.log.join(", "),
        report.killed,
        report.restarts,
        report.crash_restarts,
        report.skipped,
        summary.line()
    );
    summary.assert_nothing_lost();
    assert!(report.killed.iter().sum::<u64>() > 0, "the chaos killed no connection");
    assert!(report.restarts + report.crash_restarts >= 1, "the server never restarted");
    assert!(summary.storage_errors > 0, "the faults never reached the store");
    assert!(summary.acked_keys >= 16 && summary.counter_acked >= 16, "too little load");
    store.close().await.expect("close");
    drop(server);
}
