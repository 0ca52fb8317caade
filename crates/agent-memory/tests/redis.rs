//! The Redis provider against real single servers: the whole conformance suite on a shared
//! server, plus erasure, durability and fault tests on servers of their own.

mod support {
    pub mod apps;
    pub mod fixture;
    pub mod leaks;
    pub mod search_options;
}

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::conformance::Fixture;
use agent_memory::{
    MemoryError, MemoryScope, MemoryStore, MemoryWrite, PageRequest, RedisMemoryStore, Timestamp,
};
use agent_memory_testkit::redis::{shared_url, RedisServer};
use support::apps::{fresh_app, fresh_scope};
use support::fixture::{from_url, with_param};
use support::leaks::error_text;

async fn store() -> Fixture {
    from_url(shared_url(), RedisMemoryStore::from_url)
}

agent_memory::conformance_tests!(store);

async fn started(url: &str) -> RedisMemoryStore {
    let store = RedisMemoryStore::from_url(url).expect("a valid URL");
    store.start().await.expect("the store starts");
    store
}

/// A server of the test's own, a store started on it, and a fresh user's scope.
async fn on_own_server() -> (RedisServer, RedisMemoryStore, MemoryScope) {
    let server = RedisServer::start();
    let store = started(&server.url()).await;
    (server, store, fresh_scope("redis-test", "user"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_user_leaves_no_key_behind_and_works_in_batches() {
    let server = RedisServer::start();
    let store = started(&with_param(&server.url(), "erase_batch_size=3")).await;
    let app = fresh_app("redis-test");

    // Another user of the same application, and the same user id in another application.
    let other = MemoryScope::new(&app, "other").unwrap();
    let elsewhere = MemoryScope::new(format!("{app}-2"), "erased").unwrap();
    store.put(&other, "k", MemoryWrite::new("stays")).await.unwrap();
    store.put(&elsewhere, "k", MemoryWrite::new("stays too")).await.unwrap();
    let keys_before = server.dbsize();

    let user = MemoryScope::new(&app, "erased").unwrap();
    let mut written = 0;
    for namespace in [None, Some("notes"), Some("prefs:{x}"), Some("}")] {
        let scope = match namespace {
            Some(ns) => user.with_namespace(ns).unwrap(),
            None => user.clone(),
        };
        for i in 0..7 {
            store.put(&scope, &format!("k{i}"), MemoryWrite::new("erase me")).await.unwrap();
            written += 1;
        }
    }
    let soon = Timestamp::now().saturating_add(Duration::from_millis(200));
    store.put(&user, "expiring", MemoryWrite::new("x").expires_at(soon)).await.unwrap();
    written += 1;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.dbsize() > keys_before);

    let removed = store.delete_user(&app, "erased").await.unwrap();
    assert_eq!(removed, written, "expired records count too");
    assert_eq!(server.dbsize(), keys_before, "no key, index or counter of the user remains");
    let namespaces = store.list_namespaces(&app, "erased", PageRequest::default()).await.unwrap();
    assert!(namespaces.items.is_empty());
    assert_eq!(store.get(&other, "k").await.unwrap().unwrap().content, "stays");
    assert_eq!(store.get(&elsewhere, "k").await.unwrap().unwrap().content, "stays too");
    // A second call finds nothing left.
    assert_eq!(store.delete_user(&app, "erased").await.unwrap(), 0);

    // delete_all in batches too.
    let ns = other.with_namespace("bulk").unwrap();
    for i in 0..10 {
        store.put(&ns, &format!("b{i}"), MemoryWrite::new("bulk")).await.unwrap();
    }
    assert_eq!(store.delete_all(&ns).await.unwrap(), 10);
    // The records and the namespace's index are gone; what remains of it is the user's revision
    // floor, which delete_all raised so re-created keys never repeat a revision.
    assert_eq!(server.dbsize(), keys_before + 1);
    assert_eq!(store.delete_user(&app, "other").await.unwrap(), 1);
    assert_eq!(
        server.dbsize(),
        keys_before - 5,
        "the other user's record, index, namespace set and usage, and the application's user \
         index, now empty"
    );
    store.close().await.unwrap();
}

/// Records written before usage was kept (a user with records and no usage hash) are counted
/// once, from the records, by the first script that needs the count: quotas hold at once, and
/// deletes and purges free exactly what those records were charged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_from_before_usage_was_kept_are_counted_once() {
    let server = RedisServer::start();
    let plain = started(&server.url()).await;
    let user = fresh_scope("redis-test", "legacy");
    let notes = user.with_namespace("notes").unwrap();
    let source = agent_memory::Source { agent: Some("bot \"1\"".into()), ..Default::default() };
    let metadata = serde_json::json!({"k": [1, "é"]});
    let rich = MemoryWrite::new("hello").metadata(metadata.clone()).source(source.clone());
    plain.put(&user, "a", rich).await.unwrap();
    plain.put(&notes, "b", MemoryWrite::new("world")).await.unwrap();
    let soon = Timestamp::now().saturating_add(Duration::from_millis(200));
    plain.put(&notes, "c", MemoryWrite::new("brief").expires_at(soon)).await.unwrap();
    // Forget the usage, as a store written before it was kept has none.
    let usage: Vec<String> = server
        .cli(&["KEYS", "am:*q"])
        .lines()
        .map(str::to_owned)
        .filter(|key| !key.is_empty())
        .collect();
    assert_eq!(usage.len(), 1, "one user, one usage hash: {usage:?}");
    server.cli(&["DEL", &usage[0]]);

    let charged =
        agent_memory::quota::record_bytes("a", "hello", metadata.as_object().unwrap(), &source)
            + 2 * (1 + 5 + 2 + 2);
    let store = RedisMemoryStore::builder(&server.url())
        .unwrap()
        .max_records_per_user(4)
        .max_bytes_per_user(charged + 10)
        .build()
        .unwrap();
    store.start().await.unwrap();
    // 10 bytes left: key "d" (1) + "{}" + "{}" leaves 5 for the content.
    let err = store.put(&user, "d", MemoryWrite::new("123456")).await.unwrap_err();
    assert!(matches!(err, MemoryError::QuotaExceeded { quota: "max_bytes_per_user", .. }), "{err}");
    store.put(&user, "d", MemoryWrite::new("12345")).await.expect("exactly the room left");
    let err = store.put(&user, "e", MemoryWrite::new("")).await.unwrap_err();
    assert!(matches!(err, MemoryError::QuotaExceeded { quota: "max_records_per_user", .. }));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(store.purge_expired(&notes, PageRequest::default()).await.unwrap().deleted, 1);
    store.put(&user, "e", MemoryWrite::new("")).await.expect("the purge freed a record");
    assert!(store.delete(&user, "a", None).await.unwrap());
    assert_eq!(store.delete_all(&notes).await.unwrap(), 1);
    assert_eq!(store.delete_user(user.application_id(), "legacy").await.unwrap(), 2);
    // The application index names the application, not the user, and stays (ADR 0013).
    assert_eq!(server.dbsize(), 1, "nothing of the erased user remains, usage included");
    store.close().await.unwrap();
    plain.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_are_not_reused_after_the_user_is_erased() {
    let store = started(&shared_url()).await;
    let scope = fresh_scope("redis-test", "user");
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(store.put(&scope, "k", MemoryWrite::new("v")).await.unwrap().revision);
        store.delete(&scope, "k", None).await.unwrap();
        seen.push(store.put(&scope, "k", MemoryWrite::new("v")).await.unwrap().revision);
        store.delete_user(scope.application_id(), scope.user_id()).await.unwrap();
    }
    let distinct: std::collections::HashSet<_> = seen.iter().collect();
    assert_eq!(distinct.len(), seen.len(), "{seen:?}");
    // An old revision cannot be used to overwrite the re-created key.
    let old = seen[0].clone();
    store.put(&scope, "k", MemoryWrite::new("new")).await.unwrap();
    let err = store.put(&scope, "k", MemoryWrite::new("x").expected_revision(old)).await;
    assert!(matches!(err, Err(MemoryError::Conflict { .. })));
}

/// With the lowest list budget there is (one more than the largest page) and a search budget
/// below a page, `list` still fills its pages: its budget never drops below a page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_fills_its_pages_with_the_lowest_list_budget() {
    let store = RedisMemoryStore::builder(&shared_url())
        .unwrap()
        .search_scan_limit(10)
        .list_scan_limit(101)
        .build()
        .unwrap();
    store.start().await.unwrap();
    let scope = fresh_scope("redis-test", "user");
    for i in 0..35 {
        let content = if i % 17 == 16 { "needle here" } else { "hay" };
        store.put(&scope, &format!("k{i:02}"), MemoryWrite::new(content)).await.unwrap();
    }
    let page = store.list(&scope, PageRequest::new(100)).await.unwrap();
    assert_eq!(page.items.len(), 35);
    assert!(page.next_cursor.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_modes_case_folding_and_metadata_filters_narrow_in_the_script() {
    let store = started(&with_param(&shared_url(), "search_scan_limit=3")).await;
    let s = fresh_scope("redis-test", "user");
    support::search_options::search_options_narrow_to_exact_answers(&store, &s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_words_of_a_query_share_the_byte_budget() {
    let store = started(&with_param(&shared_url(), "search_scan_bytes=400")).await;
    let s = fresh_scope("redis-test", "user");
    support::search_options::the_words_of_a_query_share_the_byte_budget(&store, &s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erase_batches_larger_than_lua_can_unpack_still_erase() {
    let server = RedisServer::start();
    let store = started(&with_param(&server.url(), "erase_batch_size=10000")).await;
    let store = Arc::new(store);
    let app = fresh_app("redis-test");
    let user = MemoryScope::new(&app, "many").unwrap();
    let notes = user.with_namespace("notes").unwrap();
    // 10,050 records in one namespace (more than Lua's unpack takes at once), 20 in another.
    let mut writers = Vec::new();
    for w in 0..8 {
        let (store, scope) = (Arc::clone(&store), user.clone());
        writers.push(tokio::spawn(async move {
            for n in (w..10_050).step_by(8) {
                store.put(&scope, &format!("k{n:05}"), MemoryWrite::new("v")).await.unwrap();
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    for n in 0..20 {
        store.put(&notes, &format!("k{n}"), MemoryWrite::new("v")).await.unwrap();
    }
    assert_eq!(store.delete_all(&notes).await.unwrap(), 20);
    assert_eq!(store.delete_user(&app, "many").await.unwrap(), 10_050);
    assert_eq!(server.dbsize(), 1, "no key of the user is left, only the application index");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_warns_about_a_server_that_can_lose_data_and_refuses_when_durability_is_required() {
    let server = RedisServer::start_with(&["--save", "", "--appendonly", "no"]);
    let lenient = RedisMemoryStore::from_url(&server.url()).unwrap();
    lenient.start().await.expect("without require_durable the store starts, with a warning");
    let report = lenient.durability().expect("start() inspected the deployment");
    assert!(!report.is_durable());
    assert!(report.problems().iter().any(|p| p.contains("appendonly is off")), "{report:?}");

    let strict =
        RedisMemoryStore::builder(&server.url()).unwrap().require_durable(true).build().unwrap();
    let err = strict.start().await.expect_err("require_durable refuses a non-durable server");
    assert!(err.is_storage(), "{err}");
    let scope = fresh_scope("redis-test", "user");
    let err = strict.get(&scope, "k").await.expect_err("not started");
    assert!(err.is_storage());

    let evicting = RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--maxmemory",
        "100mb",
        "--maxmemory-policy",
        "allkeys-lru",
    ]);
    let strict =
        RedisMemoryStore::builder(&evicting.url()).unwrap().require_durable(true).build().unwrap();
    assert!(strict.start().await.expect_err("allkeys-lru evicts records").is_storage());
    assert!(strict.durability().unwrap().problems().iter().any(|p| p.contains("evict")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_accepts_a_durable_server_when_durability_is_required() {
    for fsync in ["always", "everysec"] {
        let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", fsync]);
        let store = RedisMemoryStore::builder(&server.url())
            .unwrap()
            .require_durable(true)
            .build()
            .unwrap();
        store.start().await.expect("a durable server is accepted");
        assert!(store.durability().unwrap().is_durable());
        let scope = fresh_scope("redis-test", "user");
        store.put(&scope, "k", MemoryWrite::new("v")).await.unwrap();
        store.close().await.unwrap();
        assert!(store.get(&scope, "k").await.unwrap_err().is_storage(), "closed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_connection_fails_the_operation_in_flight_and_recovers() {
    let (server, store, scope) = on_own_server().await;
    store.put(&scope, "before", MemoryWrite::new("v")).await.unwrap();

    // Hold a write in flight: the server parks it while clients are paused for writes.
    server.cli(&["CLIENT", "PAUSE", "5000", "WRITE"]);
    let store = Arc::new(store);
    let in_flight = {
        let (store, scope) = (Arc::clone(&store), scope.clone());
        tokio::spawn(async move { store.put(&scope, "in-flight", MemoryWrite::new("v")).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!in_flight.is_finished(), "the write is parked by CLIENT PAUSE");
    let killed = server.cli(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    assert_ne!(killed, "0", "the store's connection was killed");
    let err = in_flight.await.unwrap().expect_err("the connection died under the write");
    assert!(err.is_storage(), "{err}");
    server.cli(&["CLIENT", "UNPAUSE"]);

    // The store reconnects by itself.
    let recovered = eventually(|| store.get(&scope, "before")).await;
    assert_eq!(recovered.unwrap().content, "v");
    store.put(&scope, "after", MemoryWrite::new("v")).await.unwrap();
}

/// Retries a read until it succeeds (a reconnect takes a moment); panics after 10 s.
async fn eventually<T, F, Fut>(mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = agent_memory::Result<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match op().await {
            Ok(value) => return value,
            Err(err) if err.is_storage() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("did not recover: {err}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_under_load_keeps_every_acknowledged_write_with_fsync_always() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = Arc::new(started(&server.url()).await);
    let scope = fresh_scope("redis-test", "user");
    let stop_at = Instant::now() + Duration::from_millis(2500);
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let (store, scope) = (Arc::clone(&store), scope.clone());
        tasks.push(tokio::spawn(async move {
            let mut acknowledged = HashMap::new();
            let mut failures = 0u32;
            let mut after_failure = 0u32;
            let mut i = 0;
            while Instant::now() < stop_at {
                let key = format!("w{worker}-{i}");
                match store.put(&scope, &key, MemoryWrite::new(format!("value {i}"))).await {
                    Ok(record) => {
                        if failures > 0 {
                            after_failure += 1;
                        }
                        acknowledged.insert(key, record.revision);
                    }
                    Err(err) => {
                        assert!(err.is_storage(), "{err}");
                        failures += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                i += 1;
            }
            (acknowledged, failures, after_failure)
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    // SIGKILL and start again on the same port and directory, while the workers keep writing.
    let server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    let mut acknowledged = HashMap::new();
    let (mut failures, mut recovered) = (0, 0);
    for task in tasks {
        let (acks, failed, after) = task.await.unwrap();
        acknowledged.extend(acks);
        failures += failed;
        recovered += after;
    }
    assert!(failures > 0, "the restart failed the writes in flight");
    assert!(recovered > 0, "writes succeed again after the restart");
    for (key, revision) in &acknowledged {
        let record = eventually(|| store.get(&scope, key)).await;
        let record = record.unwrap_or_else(|| panic!("acknowledged write {key} was lost"));
        assert_eq!(&record.revision, revision);
    }
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_reload_by_themselves_after_the_server_forgets_them() {
    let (server, store, scope) = on_own_server().await;
    store.put(&scope, "k", MemoryWrite::new("v")).await.unwrap();
    assert_eq!(server.cli(&["SCRIPT", "FLUSH"]), "OK");
    assert_eq!(store.get(&scope, "k").await.unwrap().unwrap().content, "v");
    store.put(&scope, "k2", MemoryWrite::new("v")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_and_debug_output_never_show_the_password() {
    let password = "pw-Zq8-never-shown";
    let server = RedisServer::start_with(&["--requirepass", password]);
    assert!(server.url().contains(password));
    let ok = started(&server.url()).await;
    let scope = fresh_scope("redis-test", "user");
    ok.put(&scope, "k", MemoryWrite::new("v")).await.unwrap();
    assert!(!format!("{ok:?}").contains(password));

    let wrong = format!("redis://:{password}-wrong@127.0.0.1:{}", server.port());
    let store = RedisMemoryStore::from_url(&wrong).unwrap();
    let err = store.start().await.expect_err("wrong password");
    assert!(err.is_storage());
    assert!(!error_text(&err).contains(password), "{}", error_text(&err));
    assert!(!format!("{store:?}").contains(password));
    let builder = RedisMemoryStore::builder(&wrong).unwrap();
    assert!(!format!("{builder:?}").contains(password));

    let unreachable = format!("redis://:{password}@127.0.0.1:1");
    let err = started_err(&unreachable).await;
    assert!(err.is_storage());
    assert!(!error_text(&err).contains(password), "{}", error_text(&err));

    let cluster = format!("redis+cluster://:{password}@127.0.0.1:1,127.0.0.1:2");
    let err = started_err(&cluster).await;
    assert!(!error_text(&err).contains(password), "{}", error_text(&err));

    for bad in [
        format!("rediss://:{password}@127.0.0.1:6379?cacert=/nonexistent/ca.pem"),
        format!("redis+cluster://:{password}@"),
        format!("redis+cluster://:{password}@127.0.0.1:7000/3"),
        format!("redis://:{password}@127.0.0.1:notaport"),
    ] {
        let err = agent_memory::open(&bad).expect_err("rejected");
        assert!(err.is_invalid(), "{err}");
        assert!(!err.to_string().contains(password));
    }
}

async fn started_err(url: &str) -> MemoryError {
    let store = RedisMemoryStore::builder(url)
        .expect("a well-formed URL")
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("valid options");
    store.start().await.expect_err("nothing listens there")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_takes_a_redis_url() {
    let store = agent_memory::open(&shared_url()).unwrap();
    store.start().await.unwrap();
    store.start().await.expect("start is idempotent");
    let scope = fresh_scope("redis-test", "user");
    let written = store.put(&scope, "k", MemoryWrite::new("v")).await.unwrap();
    assert_eq!(store.get(&scope, "k").await.unwrap().unwrap(), written);
    store.close().await.unwrap();
    store.close().await.expect("close is idempotent");
    assert!(store.get(&scope, "k").await.unwrap_err().is_storage());
}

/// The user index (ADR 0011): one key per application, joined by a user's first write and
/// left by `delete_user`; a refused first write leaves no entry, and users without records
/// (ghosts) are never listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_index_follows_first_writes_and_erasure() {
    let server = RedisServer::start();
    let store = started(&with_param(&server.url(), "max_bytes_per_user=200")).await;
    let app = fresh_app("redis-test");
    let index = format!("am:{{{:02x}{}}}:u", app.len(), hex(&app));
    let members = |server: &RedisServer| server.cli(&["ZRANGE", &index, "0", "-1"]);

    // A first write refused by the quota writes no record; its index entry stays (a racing
    // first write of the same user may succeed) but is never listed, and delete_user takes it.
    let big = MemoryScope::new(&app, "big").unwrap();
    let err = store.put(&big, "k", MemoryWrite::new("x".repeat(500))).await.unwrap_err();
    assert!(matches!(err, MemoryError::QuotaExceeded { .. }), "{err:?}");
    assert_eq!(members(&server).trim(), "626967", "the refused user is indexed");
    let listed = store.list_users(&app, PageRequest::new(10)).await.unwrap();
    assert!(listed.items.is_empty() && listed.next_cursor.is_none(), "{listed:?}");
    assert_eq!(store.delete_user(&app, "big").await.unwrap(), 0);
    assert_eq!(server.dbsize(), 1, "nothing of the refused user remains, only the app index");

    // First writes join the index; later writes of the same user do not touch it.
    for user in ["b", "a", "c"] {
        let scope = MemoryScope::new(&app, user).unwrap();
        store.put(&scope, "k1", MemoryWrite::new("x")).await.unwrap();
        store.put(&scope, "k2", MemoryWrite::new("x")).await.unwrap();
    }
    assert_eq!(members(&server).split_whitespace().collect::<Vec<_>>(), ["61", "62", "63"]);

    // "b" loses its records without delete_user: a ghost in the index, never listed; a page
    // with it is short and still has a cursor.
    let b = MemoryScope::new(&app, "b").unwrap();
    store.delete_all(&b).await.unwrap();
    let first = store.list_users(&app, PageRequest::new(2)).await.unwrap();
    assert_eq!(first.items, ["a"]);
    let rest = store.list_users(&app, PageRequest::new(2).after(first.next_cursor.unwrap()));
    assert_eq!(rest.await.unwrap().items, ["c"]);
    // Writing again makes the ghost a user again.
    store.put(&b, "k", MemoryWrite::new("x")).await.unwrap();
    let all = store.list_users(&app, PageRequest::new(10)).await.unwrap();
    assert_eq!(all.items, ["a", "b", "c"]);
    assert!(all.next_cursor.is_none());

    // delete_user takes the user out; the last one takes the index with it.
    for user in ["a", "b", "c"] {
        store.delete_user(&app, user).await.unwrap();
    }
    assert_eq!(members(&server).trim(), "");
    assert_eq!(server.dbsize(), 1, "no key of the application remains but its index entry");
    store.close().await.unwrap();
}

/// The application index (ADR 0013): one key for the store, joined by an application's first
/// user's first write and never left; listing skips applications without a user that holds a
/// record (every user erased, or ghosts only), with short pages that keep their cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_application_index_follows_first_writes_and_skips_empty_applications() {
    let server = RedisServer::start();
    let store = started(&server.url()).await;
    let members = |server: &RedisServer| {
        let listed = server.cli(&["ZRANGE", "am:apps", "0", "-1"]);
        listed.split_whitespace().map(str::to_owned).collect::<Vec<_>>()
    };
    let listed = |page: agent_memory::ApplicationPage| page.items;

    // A first write indexes the user, then the application; later writes and other users of
    // the application leave the index as it is.
    let a1 = MemoryScope::new("app-a", "u1").unwrap();
    store.put(&a1, "k", MemoryWrite::new("x")).await.unwrap();
    assert_eq!(members(&server), [hex("app-a")]);
    store.put(&a1, "k2", MemoryWrite::new("x")).await.unwrap();
    store.put(&MemoryScope::new("app-a", "u2").unwrap(), "k", MemoryWrite::new("x")).await.unwrap();
    for app in ["app-c", "app-b", "app-d"] {
        store.put(&MemoryScope::new(app, "u1").unwrap(), "k", MemoryWrite::new("x")).await.unwrap();
    }
    assert_eq!(members(&server), ["app-a", "app-b", "app-c", "app-d"].map(hex));
    let all = store.list_applications(PageRequest::new(10)).await.unwrap();
    assert_eq!(all.items, ["app-a", "app-b", "app-c", "app-d"]);
    assert!(all.next_cursor.is_none());

    // "app-b" is erased: its entry stays, and it is never listed; a page with it is short and
    // keeps its cursor.
    store.delete_user("app-b", "u1").await.unwrap();
    assert_eq!(members(&server).len(), 4, "erasure leaves the application index alone");
    let first = store.list_applications(PageRequest::new(2)).await.unwrap();
    assert_eq!(first.items, ["app-a"]);
    let rest = PageRequest::new(2).after(first.next_cursor.expect("a short page keeps its cursor"));
    let rest = store.list_applications(rest).await.unwrap();
    assert_eq!(rest.items, ["app-c", "app-d"]);
    assert!(rest.next_cursor.is_none());

    // "app-c"'s only user loses its records without delete_user: a ghost in the user index,
    // so the application holds nothing and is skipped; writing again brings it back.
    let c1 = MemoryScope::new("app-c", "u1").unwrap();
    store.delete_all(&c1).await.unwrap();
    assert_eq!(
        listed(store.list_applications(PageRequest::new(10)).await.unwrap()),
        ["app-a", "app-d"]
    );
    store.put(&c1, "k", MemoryWrite::new("x")).await.unwrap();
    let all = listed(store.list_applications(PageRequest::new(10)).await.unwrap());
    assert_eq!(all, ["app-a", "app-c", "app-d"]);

    // An application whose first users (as many as listing checks) are ghosts counts as
    // holding a record, whether a later user holds one or not: a false positive, never a
    // miss. Once no more users than that are indexed, ghosts only, it is skipped.
    for user in ["g1", "g2", "g3", "g4", "real"] {
        let scope = MemoryScope::new("app-e", user).unwrap();
        store.put(&scope, "k", MemoryWrite::new("x")).await.unwrap();
        if user != "real" {
            assert!(store.delete(&scope, "k", None).await.unwrap());
        }
    }
    let with_e = ["app-a", "app-c", "app-d", "app-e"];
    assert_eq!(listed(store.list_applications(PageRequest::new(10)).await.unwrap()), with_e);
    assert!(store.delete(&MemoryScope::new("app-e", "real").unwrap(), "k", None).await.unwrap());
    assert_eq!(listed(store.list_applications(PageRequest::new(10)).await.unwrap()), with_e);
    store.delete_user("app-e", "real").await.unwrap();
    let all = listed(store.list_applications(PageRequest::new(10)).await.unwrap());
    assert_eq!(all, ["app-a", "app-c", "app-d"], "four ghosts, all checked, hold no record");
    store.close().await.unwrap();
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}
