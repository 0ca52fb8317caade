//! The PostgreSQL provider against a real server: the whole conformance suite, plus the
//! provider's own promises (schema setup and checks, bounded search and erasure, recovery
//! from dead connections and server restarts, two replicas on one table).
//!
//! The server is `AGENT_MEMORY_TEST_POSTGRES_URL` when set, otherwise one the testkit starts
//! for this process; the restart test starts its own.

mod support {
    pub mod fixture;
    pub mod leaks;
    pub mod pg;
    pub mod search_options;
}

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::conformance::{increment_counter, Fixture};
use agent_memory::postgres::PostgresMemoryStoreBuilder;
use agent_memory::{
    MemoryError, MemoryScope, MemoryStore, MemoryWrite, PageRequest, PostgresMemoryStore,
};
use agent_memory_testkit::postgres::{shared_url, PostgresServer};
use support::fixture::{from_url, with_param};
use support::leaks::error_text;
use support::pg::{connect, unique};

async fn store() -> Fixture {
    // Two stores with their own pools on one table: two replicas of a service.
    let url = with_param(&shared_url(), "min_connections=1&max_connections=4");
    from_url(url, PostgresMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

fn scope(app: &str, user: &str) -> MemoryScope {
    MemoryScope::new(app, user).expect("valid ids")
}

/// Waits until a backend of `application_name` is blocked on a lock, and returns its pid.
async fn blocked_backend(admin: &tokio_postgres::Client, application_name: &str) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let row = admin
            .query_opt(
                "SELECT pid FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
                &[&application_name],
            )
            .await
            .expect("pg_stat_activity");
        if let Some(row) = row {
            return row.get(0);
        }
        assert!(Instant::now() < deadline, "the operation never blocked on the row lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a transaction on `locker` that holds the row lock of `user-1`'s record `key` in
/// `namespace` of `table`, so an erasure reaching it blocks there.
async fn lock_user_record(
    locker: &tokio_postgres::Client,
    table: &str,
    namespace: &str,
    key: &str,
) {
    locker.batch_execute("BEGIN").await.expect("begin");
    let sql = format!(
        "SELECT 1 FROM public.\"{table}\" \
         WHERE user_id = 'user-1' AND namespace = $1 AND key = $2 FOR UPDATE"
    );
    let locked = locker.execute(&sql, &[&namespace, &key]).await.expect("lock");
    assert_eq!(locked, 1);
}

/// Starts a transaction on `locker` that holds the row lock of `key` in `table`.
async fn lock_row(locker: &tokio_postgres::Client, table: &str, app: &str, key: &str) {
    locker.batch_execute("BEGIN").await.expect("begin");
    let locked = locker
        .execute(
            &format!("SELECT 1 FROM public.\"{table}\" WHERE app = $1 AND key = $2 FOR UPDATE"),
            &[&app, &key],
        )
        .await
        .expect("lock the row");
    assert_eq!(locked, 1);
}

/// Runs `op` while `locker` holds a row lock it needs, terminates its backend (found by
/// `application_name`) once it blocks there, checks that it failed with `Storage`, and rolls
/// the locker back; returns the terminated backend's pid.
async fn kill_when_blocked<T: std::fmt::Debug + Send + 'static>(
    admin: &tokio_postgres::Client,
    locker: &tokio_postgres::Client,
    application_name: &str,
    op: impl std::future::Future<Output = agent_memory::Result<T>> + Send + 'static,
) -> i32 {
    let running = tokio::spawn(op);
    let pid = blocked_backend(admin, application_name).await;
    admin.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.expect("terminate");
    let err = running.await.expect("join").unwrap_err();
    assert!(err.is_storage(), "{err}");
    locker.batch_execute("ROLLBACK").await.expect("rollback");
    pid
}

/// A started store on a fresh table that erases two rows a batch, its sessions named by a
/// fresh `application_name`: the table, that name and the store.
async fn erasing_in_pairs(prefix: &str) -> (String, String, Arc<PostgresMemoryStore>) {
    let (table, application_name) = (unique(prefix), unique(&format!("{prefix}_app")));
    let store = on_table(&table, Some(&application_name)).erase_batch_size(2).build();
    let store = Arc::new(store.expect("config"));
    store.start().await.expect("start");
    (table, application_name, store)
}

/// Runs the erasure `op` while the row lock of `user-1`'s record (namespace, key) in `table` is
/// held, so that it blocks at that row's batch, and kills it there (see [`kill_when_blocked`]);
/// returns an admin connection, for counting what is left.
async fn interrupt_erasure<T: std::fmt::Debug + Send + 'static>(
    table: &str,
    application_name: &str,
    (namespace, key): (&str, &str),
    op: impl std::future::Future<Output = agent_memory::Result<T>> + Send + 'static,
) -> tokio_postgres::Client {
    let admin = connect(&shared_url()).await;
    let locker = connect(&shared_url()).await;
    lock_user_record(&locker, table, namespace, key).await;
    kill_when_blocked(&admin, &locker, application_name, op).await;
    admin
}

/// A store on `table` of the shared server, its sessions named `application_name` when given.
fn on_table(table: &str, application_name: Option<&str>) -> PostgresMemoryStoreBuilder {
    let url = match application_name {
        Some(name) => with_param(&shared_url(), &format!("application_name={name}")),
        None => shared_url(),
    };
    PostgresMemoryStore::builder(&url).expect("url").table(table)
}

/// Runs `check` as `user-1` of `app` on a started store, with options from `configure`, on a
/// fresh table; then closes the store and drops the table.
async fn on_fresh_table(
    prefix: &str,
    configure: impl FnOnce(PostgresMemoryStoreBuilder) -> PostgresMemoryStoreBuilder,
    check: impl AsyncFnOnce(&dyn MemoryStore, &MemoryScope),
) {
    let table = unique(prefix);
    let store = configure(on_table(&table, None)).build().expect("config");
    store.start().await.expect("start");
    check(&store, &scope("app", "user-1")).await;
    store.close().await.expect("close");
    drop_table(&table).await;
}

/// Starts the store of `builder` with a pool of exactly `connections`, and writes "before" at
/// "k" as `user-1` of `app`; returns the store and that scope.
async fn pooled_with_record(
    builder: PostgresMemoryStoreBuilder,
    connections: usize,
) -> (Arc<PostgresMemoryStore>, MemoryScope) {
    let store =
        builder.min_connections(connections).max_connections(connections).build().expect("config");
    store.start().await.expect("start");
    let s = scope("app", "user-1");
    store.put(&s, "k", MemoryWrite::new("before")).await.expect("put");
    (Arc::new(store), s)
}

/// Drops `table` from the shared server.
async fn drop_table(table: &str) {
    let admin = connect(&shared_url()).await;
    admin.batch_execute(&format!("DROP TABLE public.\"{table}\"")).await.expect("drop");
}

#[tokio::test]
async fn open_builds_a_store_from_a_url_and_refuses_work_outside_start_and_close() {
    let table = unique("open");
    let url = with_param(&shared_url(), &format!("table={table}&max_connections=2"));
    let store = agent_memory::open(&url).expect("open");
    let s = scope("app", "user-1");
    let before = store.get(&s, "k").await.unwrap_err();
    assert!(before.is_storage(), "{before}");
    store.start().await.expect("start");
    store.start().await.expect("start is idempotent");
    store.put(&s, "k", MemoryWrite::new("v")).await.expect("put");
    assert_eq!(store.get(&s, "k").await.expect("get").expect("present").content, "v");
    store.close().await.expect("close");
    store.close().await.expect("close is idempotent");
    let after = store.get(&s, "k").await.unwrap_err();
    assert!(after.is_storage(), "{after}");
    drop_table(&table).await;
}

#[tokio::test]
async fn replicas_starting_together_create_the_schema_once_and_record_its_version() {
    let schema = unique("replicas");
    let table = unique("mem");
    let stores: Vec<Arc<PostgresMemoryStore>> = (0..8)
        .map(|_| {
            let store = PostgresMemoryStore::builder(&shared_url())
                .expect("url")
                .schema(schema.clone())
                .table(table.clone())
                .max_connections(2)
                .build()
                .expect("config");
            Arc::new(store)
        })
        .collect();
    let handles: Vec<_> = stores
        .iter()
        .map(|store| {
            let store = Arc::clone(store);
            tokio::spawn(async move { store.start().await })
        })
        .collect();
    for handle in handles {
        handle.await.expect("join").expect("every replica starts");
    }
    let s = scope("app", "user-1");
    stores[0].put(&s, "k", MemoryWrite::new("from replica 0")).await.expect("put");
    let read = stores[7].get(&s, "k").await.expect("get").expect("present");
    assert_eq!(read.content, "from replica 0");

    let admin = connect(&shared_url()).await;
    let qualified = format!("\"{schema}\".\"{table}\"");
    let row = admin
        .query_one(
            "SELECT obj_description(to_regclass($1), 'pg_class'), \
                    (SELECT collname::text FROM pg_attribute a JOIN pg_collation c \
                       ON c.oid = a.attcollation \
                     WHERE a.attrelid = to_regclass($1) AND a.attname = 'key')",
            &[&qualified],
        )
        .await
        .expect("catalog");
    assert_eq!(row.get::<_, Option<String>>(0).as_deref(), Some("agent-memory schema v2"));
    assert_eq!(row.get::<_, Option<String>>(1).as_deref(), Some("C"));
    for store in &stores {
        store.close().await.expect("close");
    }
    admin.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE")).await.expect("drop");
}

/// The `Storage` error's source, which carries the details of a schema mismatch.
fn source_text(err: &MemoryError) -> String {
    std::error::Error::source(err).map(ToString::to_string).unwrap_or_default()
}

#[tokio::test]
async fn without_setup_the_store_checks_a_provisioned_table_and_explains_differences() {
    let table = unique("provisioned");
    let build = || on_table(&table, None).setup_schema(false).build().expect("config");
    let admin = connect(&shared_url()).await;

    // Missing table: no DDL runs, start fails and says why.
    let err = build().start().await.unwrap_err();
    assert!(err.is_storage(), "{err}");
    assert!(source_text(&err).contains("does not exist"), "{}", source_text(&err));
    let exists: bool = admin
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&format!("public.\"{table}\"")])
        .await
        .expect("catalog")
        .get(0);
    assert!(!exists, "setup_schema(false) must not create the table");

    // Provisioned with the store's own DDL: starts and works.
    let store = build();
    admin.batch_execute(&store.schema_sql()).await.expect("provision");
    store.start().await.expect("a table built from schema_sql passes the check");
    let s = scope("app", "user-1");
    store.put(&s, "k", MemoryWrite::new("v")).await.expect("put");
    store.close().await.expect("close");

    // A wrong type, a wrong collation and a dropped column are each reported.
    admin
        .batch_execute(&format!(
            "ALTER TABLE public.\"{table}\" ALTER COLUMN metadata TYPE json; \
             ALTER TABLE public.\"{table}\" ALTER COLUMN content TYPE text COLLATE \"C\"; \
             ALTER TABLE public.\"{table}\" DROP COLUMN source"
        ))
        .await
        .expect("alter");
    let err = build().start().await.unwrap_err();
    assert!(err.is_storage());
    assert_eq!(
        err.to_string(),
        "storage error (postgres): the table does not have the expected schema (see the error \
         source)"
    );
    let detail = source_text(&err);
    assert!(detail.contains("column metadata has type json, expected jsonb"), "{detail}");
    assert!(detail.contains("column source is missing"), "{detail}");

    // No recorded version: refused, so a future migration knows where it starts.
    admin.batch_execute(&format!("DROP TABLE public.\"{table}\"")).await.expect("drop");
    let store = build();
    admin.batch_execute(&store.schema_sql()).await.expect("provision");
    admin
        .batch_execute(&format!("COMMENT ON TABLE public.\"{table}\" IS NULL"))
        .await
        .expect("comment");
    let err = store.start().await.unwrap_err();
    assert!(source_text(&err).contains("records no schema version"), "{}", source_text(&err));
    drop_table(&table).await;
}

/// A table of schema version 1 (no byte counts, no usage table) is upgraded by the first
/// store that starts with `setup_schema`: every row is charged in batches, each user's usage is
/// summed, and the quotas hold at once, counting the rows written before the upgrade. A store
/// with `setup_schema(false)` refuses the old table, saying how to upgrade it.
#[tokio::test]
async fn a_version_1_table_is_upgraded_with_its_usage_counted() {
    let table = unique("upgrade");
    let admin = connect(&shared_url()).await;
    admin
        .batch_execute(&format!(
            "CREATE TABLE public.\"{table}\" (
                 app text COLLATE \"C\" NOT NULL, user_id text COLLATE \"C\" NOT NULL,
                 namespace text COLLATE \"C\" NOT NULL, key text COLLATE \"C\" NOT NULL,
                 content text NOT NULL, metadata jsonb NOT NULL, source jsonb NOT NULL,
                 revision bigint NOT NULL, created_at timestamptz NOT NULL,
                 updated_at timestamptz NOT NULL, expires_at timestamptz,
                 PRIMARY KEY (app, user_id, namespace, key));
             CREATE SEQUENCE public.\"{table}_revision_seq\" AS bigint NO CYCLE;
             ALTER SEQUENCE public.\"{table}_revision_seq\" OWNED BY public.\"{table}\".revision;
             COMMENT ON TABLE public.\"{table}\" IS 'agent-memory schema v1';
             INSERT INTO public.\"{table}\"
               SELECT 'app', 'big', '', 'k' || lpad(i::text, 4, '0'), 'x', '{{}}', '{{}}', i,
                      now(), now(), NULL
               FROM generate_series(1, 1005) AS i;
             INSERT INTO public.\"{table}\" VALUES
               ('app', 'old', 'notes', 'a', 'hé', '{{\"b\": [1, 2.5], \"a\": \"x y\"}}',
                '{{\"agent\": \"bot\"}}', 2000, now(), now(), NULL);
             SELECT setval('public.\"{table}_revision_seq\"', 2000);"
        ))
        .await
        .expect("a version 1 table");
    let build = |setup: bool, quotas: agent_memory::Quotas| {
        on_table(&table, None).setup_schema(setup).quotas(quotas).build().expect("config")
    };
    let records = agent_memory::Quotas::default().max_records_per_user(1006);
    let err = build(false, records).start().await.expect_err("a version 1 table without setup");
    assert!(source_text(&err).contains("schema version 1"), "{}", source_text(&err));

    let store = build(true, records);
    store.start().await.expect("the upgrade");
    let big = scope("app", "big");
    store.put(&big, "new", MemoryWrite::new("fits")).await.expect("record 1006");
    let err = store.put(&big, "newer", MemoryWrite::new("no")).await.expect_err("1007");
    assert!(err.is_quota_exceeded(), "the 1,005 old rows all count: {err}");

    store.close().await.expect("close");
    let store = build(false, agent_memory::Quotas::default().max_bytes_per_user(100));
    store.start().await.expect("the upgraded table passes the check");
    let old = scope("app", "old");
    let metadata = serde_json::json!({"b": [1, 2.5], "a": "x y"});
    let charged = agent_memory::quota::record_bytes(
        "a",
        "hé",
        metadata.as_object().expect("an object"),
        &agent_memory::Source { agent: Some("bot".into()), ..Default::default() },
    );
    let room = 100 - charged;
    // A record of `room` bytes: key "b" (1) + content + "{}" + "{}".
    let fits = "y".repeat(usize::try_from(room - 5).expect("small"));
    let err = store.put(&old, "b", MemoryWrite::new(format!("{fits}y"))).await.expect_err("over");
    assert!(err.is_quota_exceeded(), "the old row is charged {charged} bytes: {err}");
    store.put(&old, "b", MemoryWrite::new(fits)).await.expect("exactly the room left");
    assert_eq!(store.delete_user("app", "old").await.expect("erase"), 2);
    store.close().await.expect("close");

    let usage: Vec<(String, i64)> = admin
        .query(&format!("SELECT user_id, records FROM public.\"{table}_usage\" ORDER BY 1"), &[])
        .await
        .expect("usage")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(usage, [("big".to_owned(), 1006)], "an erased user leaves no usage row");
    admin
        .batch_execute(&format!(
            "DROP TABLE public.\"{table}\"; DROP TABLE public.\"{table}_usage\"; \
             DROP FUNCTION public.\"{table}_usage_count\"()"
        ))
        .await
        .expect("drop");
}

#[tokio::test]
async fn search_modes_case_folding_and_metadata_filters_narrow_in_the_statement() {
    let check = support::search_options::search_options_narrow_to_exact_answers;
    on_fresh_table("modes", |store| store.search_scan_limit(3), check).await;
}

#[tokio::test]
async fn the_words_of_a_query_share_the_byte_budget() {
    let check = support::search_options::the_words_of_a_query_share_the_byte_budget;
    on_fresh_table("words", |store| store.search_scan_bytes(400), check).await;
}

#[tokio::test]
async fn purge_expired_inspects_at_most_limit_keys_per_call() {
    let table = unique("purge");
    let store = on_table(&table, None).build().expect("config");
    store.start().await.expect("start");
    let s = scope("app", "user-1");
    let soon = agent_memory::Timestamp::now().saturating_add(Duration::from_millis(800));
    for i in 0..10 {
        let write = MemoryWrite::new("x");
        let write = if i % 2 == 0 { write.expires_at(soon) } else { write };
        store.put(&s, &format!("k{i}"), write).await.expect("put");
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut page = PageRequest::new(3);
    let mut deleted = 0;
    let mut calls = 0;
    loop {
        let result = store.purge_expired(&s, page.clone()).await.expect("purge");
        assert!(result.deleted <= 3);
        deleted += result.deleted;
        calls += 1;
        match result.next_cursor {
            Some(cursor) => page = PageRequest::new(3).after(cursor),
            None => break,
        }
    }
    assert_eq!(deleted, 5);
    assert_eq!(calls, 4, "10 keys at 3 per call");
    let left = connect(&shared_url())
        .await
        .query_one(&format!("SELECT count(*) FROM public.\"{table}\""), &[])
        .await
        .expect("count")
        .get::<_, i64>(0);
    assert_eq!(left, 5);
    store.close().await.expect("close");
    drop_table(&table).await;
}

#[tokio::test]
async fn delete_all_commits_batches_and_a_retry_after_interruption_finishes() {
    let (table, application_name, store) = erasing_in_pairs("erase_ns").await;
    let s = scope("app", "user-1").with_namespace("notes").expect("namespace");
    for k in 0..5 {
        store.put(&s, &format!("k{k}"), MemoryWrite::new("x")).await.expect("put");
    }
    let kept = scope("app", "user-1");
    store.put(&kept, "k0", MemoryWrite::new("kept")).await.expect("put");

    // Hold the lock of the last row, so the third batch blocks; kill it there.
    let erasing = {
        let (store, s) = (Arc::clone(&store), s.clone());
        async move { store.delete_all(&s).await }
    };
    let admin = interrupt_erasure(&table, &application_name, ("notes", "k4"), erasing).await;

    let count_sql = format!(
        "SELECT count(*) FROM public.\"{table}\" WHERE user_id = 'user-1' AND namespace = $1"
    );
    let left: i64 = admin.query_one(&count_sql, &[&"notes"]).await.expect("count").get(0);
    assert_eq!(left, 1, "the two batches before the blocked one were committed");
    assert_eq!(store.delete_all(&s).await.expect("the retry succeeds"), 1);
    let left: i64 = admin.query_one(&count_sql, &[&"notes"]).await.expect("count").get(0);
    assert_eq!(left, 0);
    assert!(store.get(&kept, "k0").await.expect("get").is_some(), "other namespaces stay");
    store.close().await.expect("close");
    drop_table(&table).await;
}

#[tokio::test]
async fn delete_user_commits_batches_and_a_retry_after_interruption_finishes() {
    let (table, application_name, store) = erasing_in_pairs("erase").await;
    let base = scope("app", "user-1");
    for ns in [None, Some("ns1"), Some("ns2")] {
        let s = match ns {
            Some(ns) => base.with_namespace(ns).expect("namespace"),
            None => base.clone(),
        };
        for k in 0..3 {
            store.put(&s, &format!("k{k}"), MemoryWrite::new("x")).await.expect("put");
        }
    }
    let other = scope("app", "user-2");
    store.put(&other, "k", MemoryWrite::new("kept")).await.expect("put");

    // Hold the lock of the last row in batch order, so the fifth batch blocks; kill it there.
    let erasing = {
        let store = Arc::clone(&store);
        async move { store.delete_user("app", "user-1").await }
    };
    let admin = interrupt_erasure(&table, &application_name, ("ns2", "k2"), erasing).await;

    let count_sql =
        format!("SELECT count(*) FROM public.\"{table}\" WHERE app = 'app' AND user_id = $1");
    let left: i64 = admin.query_one(&count_sql, &[&"user-1"]).await.expect("count").get(0);
    assert_eq!(left, 1, "the four batches before the blocked one were committed");

    let removed = store.delete_user("app", "user-1").await.expect("the retry succeeds");
    assert_eq!(removed, 1);
    let left: i64 = admin.query_one(&count_sql, &[&"user-1"]).await.expect("count").get(0);
    assert_eq!(left, 0);
    let namespaces =
        store.list_namespaces("app", "user-1", PageRequest::default()).await.expect("namespaces");
    assert!(namespaces.items.is_empty());
    assert!(store.get(&other, "k").await.expect("get").is_some(), "other users are untouched");
    store.close().await.expect("close");
    drop_table(&table).await;
}

#[tokio::test]
async fn a_terminated_connection_fails_the_operation_in_flight_and_the_pool_recovers() {
    let table = unique("terminate");
    let application_name = unique("terminate_app");
    let (store, s) = pooled_with_record(on_table(&table, Some(&application_name)), 1).await;

    let admin = connect(&shared_url()).await;
    let locker = connect(&shared_url()).await;
    lock_row(&locker, &table, "app", "k").await;
    let writing = {
        let (store, s) = (Arc::clone(&store), s.clone());
        async move { store.put(&s, "k", MemoryWrite::new("in flight")).await }
    };
    let pid = kill_when_blocked(&admin, &locker, &application_name, writing).await;

    // The only pooled connection died; the next operations get a fresh one on their own.
    let read = store.get(&s, "k").await.expect("get after the kill").expect("present");
    assert_eq!(read.content, "before");
    store.put(&s, "k", MemoryWrite::new("after")).await.expect("put after the kill");

    // An idle connection killed between operations is replaced too.
    let pids: Vec<i32> = admin
        .query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", &[&application_name])
        .await
        .expect("pids")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(pids.len(), 1);
    assert_ne!(pids[0], pid);
    admin.execute("SELECT pg_terminate_backend($1)", &[&pids[0]]).await.expect("terminate");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let read = store.get(&s, "k").await.expect("get after the idle kill").expect("present");
    assert_eq!(read.content, "after");

    store.close().await.expect("close");
    drop_table(&table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_fails_the_operation_in_flight_and_the_pool_recovers() {
    // Durable settings: the crash restart below must not lose committed writes.
    let server = PostgresServer::start_durable();
    let application_name = "restart_test";
    let url = with_param(&server.url(), &format!("application_name={application_name}"));
    let (store, s) = pooled_with_record(PostgresMemoryStore::builder(&url).expect("url"), 2).await;

    let admin = connect(&server.url()).await;
    let locker = connect(&server.url()).await;
    lock_row(&locker, agent_memory::postgres::DEFAULT_TABLE, "app", "k").await;
    let writing = {
        let store = Arc::clone(&store);
        let s = s.clone();
        tokio::spawn(async move { store.put(&s, "k", MemoryWrite::new("in flight")).await })
    };
    blocked_backend(&admin, application_name).await;
    // An immediate (crash) stop: with a fast stop the locker's session may end first and let
    // the blocked write commit before its own session is told to quit.
    let mut server = tokio::task::spawn_blocking(move || {
        let mut server = server;
        server.crash_restart();
        server
    })
    .await
    .expect("restart");
    let err = writing.await.expect("join").unwrap_err();
    assert!(err.is_storage(), "{err}");

    // Every pooled connection died with the server; the store carries on without a restart.
    let read = store.get(&s, "k").await.expect("get after the restart").expect("present");
    assert_eq!(read.content, "before");
    let written =
        store.put(&s, "k", MemoryWrite::new("after")).await.expect("put after the restart");
    assert_ne!(written.revision, read.revision);
    let both = tokio::join!(store.get(&s, "k"), store.get(&s, "k"));
    assert_eq!(both.0.expect("get").expect("present").content, "after");
    assert_eq!(both.1.expect("get").expect("present").content, "after");

    // A clean restart between operations: the idle pooled connections are replaced.
    server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .expect("restart");
    assert_eq!(store.get(&s, "k").await.expect("get").expect("present").content, "after");

    // While the server is down operations fail with Storage, and recover once it is back.
    server = tokio::task::spawn_blocking(move || {
        server.stop();
        server
    })
    .await
    .expect("stop");
    let down = store.get(&s, "k").await.unwrap_err();
    assert!(down.is_storage(), "{down}");
    server = tokio::task::spawn_blocking(move || {
        server.start_again();
        server
    })
    .await
    .expect("start again");
    assert!(store.get(&s, "k").await.expect("get once the server is back").is_some());
    store.close().await.expect("close");
    drop(server);
}

#[tokio::test]
async fn errors_and_debug_output_never_show_the_password() {
    // Nothing listens on this port, so start fails while connecting.
    let port = agent_memory_testkit::util::free_port();
    let password = "hunter2-very-secret";
    let url = format!("postgres://someone:{password}@127.0.0.1:{port}/db?connect_timeout=2");
    let store = PostgresMemoryStore::builder(&url)
        .expect("url")
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("config");
    assert!(!format!("{store:?}").contains(password));
    let err = store.start().await.unwrap_err();
    assert!(err.is_storage(), "{err}");
    let text = error_text(&err);
    assert!(!text.contains(password), "leaked in {text}");
    assert!(!text.contains(&url), "leaked the URL in {text}");
    let bad = agent_memory::open(&format!("postgres://u:{password}@host:port/db")).unwrap_err();
    assert!(bad.is_invalid());
    assert!(!bad.to_string().contains(password));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_see_each_other_and_race_compare_and_set_correctly() {
    let table = unique("replicas");
    let replica = || Arc::new(on_table(&table, None).max_connections(4).build().expect("config"));
    let (a, b) = (replica(), replica());
    a.start().await.expect("start a");
    b.start().await.expect("start b");
    let s = scope("app", "user-1");

    let written = a.put(&s, "shared", MemoryWrite::new("from a")).await.expect("put");
    assert_eq!(b.get(&s, "shared").await.expect("get").expect("visible to b"), written);
    assert!(b.delete(&s, "shared", Some(&written.revision)).await.expect("delete"));
    assert!(a.get(&s, "shared").await.expect("get").is_none());

    // Both replicas try to replace the same revision at once: exactly one wins, every round.
    let base = a.put(&s, "cas", MemoryWrite::new("0")).await.expect("put");
    let mut current = base.revision;
    for round in 0..20 {
        let wa = MemoryWrite::new(format!("a{round}")).expected_revision(current.clone());
        let wb = MemoryWrite::new(format!("b{round}")).expected_revision(current.clone());
        let (ra, rb) = tokio::join!(a.put(&s, "cas", wa), b.put(&s, "cas", wb));
        let winner = match (ra, rb) {
            (Ok(w), Err(e)) | (Err(e), Ok(w)) => {
                assert!(e.is_conflict(), "the loser gets Conflict, not {e}");
                w
            }
            (Ok(_), Ok(_)) => panic!("both replicas replaced revision {current} in round {round}"),
            (Err(x), Err(y)) => panic!("neither replica won round {round}: {x}, {y}"),
        };
        let read = b.get(&s, "cas").await.expect("get").expect("present");
        assert_eq!(read.revision, winner.revision);
        assert_ne!(read.revision, current);
        current = winner.revision;
    }

    // Optimistic increments from both replicas, in parallel, lose nothing.
    let counter = a.put(&s, "counter", MemoryWrite::new("0")).await.expect("put");
    drop(counter);
    let increments = |store: Arc<PostgresMemoryStore>, s: MemoryScope| async move {
        for _ in 0..25 {
            let won = increment_counter(store.as_ref(), &s, "counter").await;
            assert!(!won.unwrap_or_else(|e| panic!("{e}")).created, "present");
        }
    };
    let ta = tokio::spawn(increments(Arc::clone(&a), s.clone()));
    let tb = tokio::spawn(increments(Arc::clone(&b), s.clone()));
    ta.await.expect("a");
    tb.await.expect("b");
    let total = a.get(&s, "counter").await.expect("get").expect("present");
    assert_eq!(total.content, "50");

    a.close().await.expect("close");
    b.close().await.expect("close");
    drop_table(&table).await;
}
