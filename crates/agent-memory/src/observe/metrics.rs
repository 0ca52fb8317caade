//! The metrics, through the `metrics` facade: names, labels, and when they are recorded.

use std::time::Instant;

use metrics::{counter, histogram, Label, Unit};

use super::span::{Counts, Operation};

/// Histogram of operation durations in seconds, by `db.system.name`, `db.operation.name` and
/// `outcome`.
pub const OPERATION_DURATION: &str = "db.client.operation.duration";
/// Counter of operations that failed with a revision conflict, by provider and operation.
pub const CONFLICTS: &str = "agent_memory.conflicts";
/// Counter of writes refused because a quota was full, by provider and operation.
pub const QUOTA_REJECTIONS: &str = "agent_memory.quota_rejections";
/// Counter of expired records `purge_expired` removed, by provider.
pub const PURGED: &str = "agent_memory.records.purged";
/// Counter of records `delete_all` and `delete_user` erased, by provider and operation.
pub const ERASED: &str = "agent_memory.records.erased";
/// Gauge of pooled connections by `db.client.connection.state` (`used`, `idle`) (PostgreSQL).
pub const CONNECTIONS: &str = "db.client.connection.count";
/// Counter of connection losses after which the driver reconnects (Redis).
pub const RECONNECTS: &str = "agent_memory.redis.reconnects";
/// Gauge of write jobs waiting for the SQLite writer thread.
pub const WRITER_QUEUE_DEPTH: &str = "agent_memory.sqlite.writer.queue_depth";
/// Gauge of write jobs the SQLite writer's connection committed in its last transaction (1 for
/// a lone write run on its caller's thread).
pub const WRITER_GROUP_SIZE: &str = "agent_memory.sqlite.writer.group_size";

/// The `outcome` label of a successful operation.
pub const OUTCOME_OK: &str = "ok";

/// Whether a metrics recorder is installed (globally or for this thread).
///
/// The facade hands out its zero-sized no-op recorder when none is; every recorder that keeps
/// anything has a size. Checking this first is what lets an uninstrumented program skip the
/// clock and the label sets altogether.
#[inline]
pub(crate) fn recording() -> bool {
    metrics::with_recorder(|recorder| std::mem::size_of_val(recorder) != 0)
}

/// When an operation started, kept only while a recorder is installed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timer(Instant);

impl Timer {
    /// The start of an operation, or `None` when nothing would record its duration.
    pub(crate) fn start() -> Option<Self> {
        recording().then(|| Self(Instant::now()))
    }
}

fn labels(system: &'static str, operation: Operation) -> [Label; 2] {
    [
        Label::from_static_parts("db.system.name", system),
        Label::from_static_parts("db.operation.name", operation.name()),
    ]
}

/// Records one finished operation: its duration, and the counters its outcome feeds.
/// `failure` is the error's [`kind_name`](crate::MemoryError::kind_name).
pub(crate) fn operation(
    system: &'static str,
    operation: Operation,
    failure: Option<&'static str>,
    timer: Timer,
    counts: &Counts,
) {
    let seconds = timer.0.elapsed().as_secs_f64();
    let [provider, op] = labels(system, operation);
    let outcome = Label::from_static_parts("outcome", failure.unwrap_or(OUTCOME_OK));
    histogram!(OPERATION_DURATION, vec![provider.clone(), op.clone(), outcome]).record(seconds);
    match failure {
        Some("conflict") => counter!(CONFLICTS, vec![provider, op]).increment(1),
        Some("quota_exceeded") => counter!(QUOTA_REJECTIONS, vec![provider, op]).increment(1),
        Some(_) => {}
        None => match (operation, counts.deleted) {
            (Operation::PurgeExpired, Some(n)) if n > 0 => {
                counter!(PURGED, vec![provider]).increment(n);
            }
            (Operation::DeleteAll | Operation::DeleteUser, Some(n)) if n > 0 => {
                counter!(ERASED, vec![provider, op]).increment(n);
            }
            _ => {}
        },
    }
}

/// Sets the connection-pool gauges of `system`.
#[cfg(feature = "postgres")]
pub(crate) fn connections(system: &'static str, used: usize, idle: usize) {
    let provider = Label::from_static_parts("db.system.name", system);
    let state = |name| Label::from_static_parts("db.client.connection.state", name);
    metrics::gauge!(CONNECTIONS, vec![provider.clone(), state("used")]).set(to_f64(used));
    metrics::gauge!(CONNECTIONS, vec![provider, state("idle")]).set(to_f64(idle));
}

/// Counts one reconnect of `system`'s connection.
#[cfg(feature = "redis")]
pub(crate) fn reconnect(system: &'static str) {
    if recording() {
        counter!(RECONNECTS, vec![Label::from_static_parts("db.system.name", system)]).increment(1);
    }
}

/// Sets the SQLite writer's gauges after it took a group of `group` jobs, `waiting` left.
#[cfg(feature = "sqlite")]
pub(crate) fn writer(group: usize, waiting: usize) {
    if recording() {
        metrics::gauge!(WRITER_GROUP_SIZE).set(to_f64(group));
        metrics::gauge!(WRITER_QUEUE_DEPTH).set(to_f64(waiting));
    }
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn to_f64(n: usize) -> f64 {
    // Counts of jobs and connections are far below 2^52: the conversion is exact.
    u32::try_from(n).map_or(f64::from(u32::MAX), f64::from)
}

/// Describes every metric (unit and help text) to the installed recorder; exporters show
/// the descriptions (Prometheus's `# HELP`). Call it once after installing a recorder.
pub fn describe() {
    metrics::describe_histogram!(
        OPERATION_DURATION,
        Unit::Seconds,
        "Duration of memory store operations, by provider, operation and outcome."
    );
    metrics::describe_counter!(CONFLICTS, "Operations that failed with a revision conflict.");
    metrics::describe_counter!(QUOTA_REJECTIONS, "Writes refused because a quota was full.");
    metrics::describe_counter!(PURGED, "Expired records removed by purge_expired.");
    metrics::describe_counter!(ERASED, "Records erased by delete_all and delete_user.");
    metrics::describe_gauge!(CONNECTIONS, "Pooled connections, by state (used, idle).");
    metrics::describe_counter!(RECONNECTS, "Connection losses after which the driver reconnects.");
    metrics::describe_gauge!(WRITER_QUEUE_DEPTH, "Write jobs waiting for the SQLite writer.");
    metrics::describe_gauge!(
        WRITER_GROUP_SIZE,
        "Write jobs committed in the SQLite writer's last transaction."
    );
}

#[cfg(test)]
mod tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;

    #[test]
    fn a_quota_rejection_is_counted_and_is_its_own_outcome() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            assert!(recording());
            let timer = Timer::start().expect("a recorder is installed");
            operation("sqlite", Operation::Put, Some("quota_exceeded"), timer, &Counts::default());
        });
        assert!(!recording(), "no recorder outside");
        let values = snapshotter.snapshot().into_vec();
        let named =
            |name: &str| values.iter().find(|(key, ..)| key.key().name() == name).expect(name);
        let (key, _, _, value) = named(QUOTA_REJECTIONS);
        assert_eq!(value, &DebugValue::Counter(1));
        assert!(key.key().labels().any(|l| l.key() == "db.operation.name" && l.value() == "put"));
        let (key, ..) = named(OPERATION_DURATION);
        let outcome =
            key.key().labels().find(|l| l.key() == "outcome").map(|l| l.value().to_owned());
        assert_eq!(outcome.as_deref(), Some("quota_exceeded"));
    }
}
