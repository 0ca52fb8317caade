//! Metrics, through `metrics-util`'s debugging recorder installed for the whole process: the
//! operation-duration histogram by provider, operation and outcome, the conflict, purge and
//! erasure counters, and each provider's gauges. One test, so the phases never mix.

use std::sync::Arc;
use std::time::Duration;

use agent_memory::observe;
use agent_memory::{
    Clock, InMemoryStore, ManualClock, MemoryScope, MemoryStore, MemoryWrite, PageRequest,
    PostgresMemoryStore, RedisMemoryStore, SqliteMemoryStore,
};
use agent_memory_testkit::redis::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;

/// A metric's values in one snapshot: (kind, name, sorted labels) → value.
type Values = Vec<(MetricKind, String, Vec<(String, String)>, DebugValue)>;

fn take(snapshotter: &Snapshotter) -> Values {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let mut labels: Vec<_> = key
                .key()
                .labels()
                .map(|label| (label.key().to_owned(), label.value().to_owned()))
                .collect();
            labels.sort();
            (key.kind(), key.key().name().to_owned(), labels, value)
        })
        .collect()
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut labels: Vec<_> =
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    labels.sort();
    labels
}

fn find<'a>(values: &'a Values, name: &str, pairs: &[(&str, &str)]) -> Option<&'a DebugValue> {
    let wanted = labels(pairs);
    values.iter().find(|(_, n, l, _)| n == name && *l == wanted).map(|(_, _, _, value)| value)
}

/// How many durations the histogram holds for `system`'s `operation` with `outcome`; each is
/// a positive number of seconds.
fn durations(values: &Values, system: &str, operation: &str, outcome: &str) -> usize {
    let pairs =
        [("db.system.name", system), ("db.operation.name", operation), ("outcome", outcome)];
    match find(values, observe::OPERATION_DURATION, &pairs) {
        Some(DebugValue::Histogram(seconds)) => {
            assert!(seconds.iter().all(|s| s.0 > 0.0 && s.0 < 60.0), "{seconds:?}");
            seconds.len()
        }
        Some(other) => panic!("not a histogram: {other:?}"),
        None => 0,
    }
}

fn counter(values: &Values, name: &str, pairs: &[(&str, &str)]) -> u64 {
    match find(values, name, pairs) {
        Some(DebugValue::Counter(n)) => *n,
        Some(other) => panic!("not a counter: {other:?}"),
        None => 0,
    }
}

fn gauge(values: &Values, name: &str, pairs: &[(&str, &str)]) -> Option<f64> {
    match find(values, name, pairs) {
        Some(DebugValue::Gauge(value)) => Some(value.0),
        Some(other) => panic!("not a gauge: {other:?}"),
        None => None,
    }
}

fn app() -> String {
    format!("metrics-{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_feed_the_histogram_the_counters_and_the_gauges() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder of this test binary");
    observe::describe_metrics();

    // The in-process store: every outcome, and each counter.
    let clock = ManualClock::starting_now();
    let store = InMemoryStore::with_clock(Arc::new(clock.clone()));
    store.start().await.unwrap();
    let scope = MemoryScope::new(app(), "user").unwrap();
    store.put(&scope, "a", MemoryWrite::new("x")).await.unwrap();
    store.put(&scope, "a", MemoryWrite::new("x").create_only()).await.unwrap_err();
    store.get(&scope, "bad\u{7}key").await.unwrap_err();
    let soon = clock.now().saturating_add(Duration::from_secs(60));
    store.put(&scope, "b", MemoryWrite::new("x").expires_at(soon)).await.unwrap();
    clock.advance(Duration::from_secs(61));
    let purged = store.purge_expired(&scope, PageRequest::new(10)).await.unwrap();
    assert_eq!(purged.deleted, 1);
    store.put(&scope, "c", MemoryWrite::new("x")).await.unwrap();
    assert_eq!(store.delete_all(&scope).await.unwrap(), 2);
    store.put(&scope, "d", MemoryWrite::new("x")).await.unwrap();
    assert_eq!(store.delete_user(scope.application_id(), scope.user_id()).await.unwrap(), 1);

    let values = take(&snapshotter);
    assert_eq!(durations(&values, "memory", "put", "ok"), 4);
    assert_eq!(durations(&values, "memory", "put", "conflict"), 1);
    assert_eq!(durations(&values, "memory", "get", "invalid"), 1);
    assert_eq!(durations(&values, "memory", "purge_expired", "ok"), 1);
    assert_eq!(durations(&values, "memory", "start", "ok"), 1);
    let memory_put = [("db.system.name", "memory"), ("db.operation.name", "put")];
    assert_eq!(counter(&values, observe::CONFLICTS, &memory_put), 1);
    assert_eq!(counter(&values, observe::QUOTA_REJECTIONS, &memory_put), 0);
    assert_eq!(counter(&values, observe::PURGED, &[("db.system.name", "memory")]), 1);
    let erased = |op| [("db.system.name", "memory"), ("db.operation.name", op)];
    assert_eq!(counter(&values, observe::ERASED, &erased("delete_all")), 2);
    assert_eq!(counter(&values, observe::ERASED, &erased("delete_user")), 1);
    // Labels name providers, operations and outcomes only.
    for (_, _, labels, _) in &values {
        for (key, value) in labels {
            assert!(!value.contains("metrics-") && value != "user", "{key}={value}");
        }
    }

    // SQLite: the writer's gauges, set by whichever thread commits on its connection.
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteMemoryStore::builder(dir.path().join("metrics.db")).build().unwrap();
    sqlite.start().await.unwrap();
    let scope = MemoryScope::new(app(), "user").unwrap();
    for key in ["a", "b", "c"] {
        sqlite.put(&scope, key, MemoryWrite::new("x")).await.unwrap();
    }
    sqlite.close().await.unwrap();
    let values = take(&snapshotter);
    assert_eq!(durations(&values, "sqlite", "put", "ok"), 3);
    let group = gauge(&values, observe::WRITER_GROUP_SIZE, &[]).expect("the group size is set");
    assert!(group >= 1.0, "{group}");
    assert_eq!(gauge(&values, observe::WRITER_QUEUE_DEPTH, &[]), Some(0.0));

    // PostgreSQL: the pool's connections in use and idle after an operation.
    let url = agent_memory_testkit::postgres::shared_url();
    let table = format!("metrics_{}", uuid::Uuid::new_v4().simple());
    let postgres = PostgresMemoryStore::builder(&url).unwrap().table(table).build().unwrap();
    postgres.start().await.unwrap();
    let scope = MemoryScope::new(app(), "user").unwrap();
    postgres.put(&scope, "a", MemoryWrite::new("x")).await.unwrap();
    postgres.get(&scope, "a").await.unwrap();
    let values = take(&snapshotter);
    postgres.close().await.unwrap();
    assert_eq!(durations(&values, "postgresql", "get", "ok"), 1);
    let state = |state| [("db.system.name", "postgresql"), ("db.client.connection.state", state)];
    let idle = gauge(&values, observe::CONNECTIONS, &state("idle")).expect("idle is set");
    let used = gauge(&values, observe::CONNECTIONS, &state("used")).expect("used is set");
    assert!(idle >= 1.0 && used >= 0.0, "idle {idle}, used {used}");

    // Redis: a lost connection counts as a reconnect, and the failure as a storage outcome.
    let mut server = RedisServer::start();
    let redis = RedisMemoryStore::from_url(&server.url()).unwrap();
    redis.start().await.unwrap();
    let scope = MemoryScope::new(app(), "user").unwrap();
    redis.put(&scope, "a", MemoryWrite::new("x")).await.unwrap();
    server.kill();
    redis.get(&scope, "a").await.unwrap_err();
    let values = take(&snapshotter);
    assert_eq!(durations(&values, "redis", "put", "ok"), 1);
    assert_eq!(durations(&values, "redis", "get", "storage"), 1);
    assert!(counter(&values, observe::RECONNECTS, &[("db.system.name", "redis")]) >= 1);
}
