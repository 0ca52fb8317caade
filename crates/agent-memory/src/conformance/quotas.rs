//! Quotas: a store built with `max_records_per_user` or `max_bytes_per_user` refuses, in the
//! same atomic step as the write, any write that would take a user past them, counting every
//! record the user physically holds; removals free space.

use std::sync::Arc;

use serde_json::json;

use super::support::{get, keys, list_all, purge_all, put};
use crate::conformance::Harness;
use crate::error::{MemoryError, Result};
use crate::quota::{record_bytes, Quotas, MAX_BYTES_PER_USER, MAX_RECORDS_PER_USER};
use crate::record::{MemoryRecord, Metadata, Source};
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

/// Panics unless `result` is `QuotaExceeded` naming `quota` and `limit`.
fn expect_quota<T: std::fmt::Debug>(result: Result<T>, quota: &str, limit: u64, what: &str) {
    match result {
        Err(MemoryError::QuotaExceeded { quota: found, limit: found_limit }) => {
            assert_eq!(
                (found, found_limit),
                (quota, limit),
                "{what}: QuotaExceeded names its limit"
            )
        }
        other => panic!("{what}: expected QuotaExceeded ({quota} {limit}), got {other:?}"),
    }
}

fn records(n: u64) -> Quotas {
    Quotas::default().max_records_per_user(n)
}

fn bytes(n: u64) -> Quotas {
    Quotas::default().max_bytes_per_user(n)
}

/// What a record without metadata or source is charged.
fn plain_bytes(key: &str, content: &str) -> u64 {
    record_bytes(key, content, &Metadata::new(), &Source::default())
}

/// With `max_records_per_user` 3, three records fit, the fourth is `QuotaExceeded` and is not
/// written, and replacing a held record still works.
pub async fn quota_admits_up_to_the_limit_and_refuses_one_past(h: Harness) {
    let store = h.with_quotas(records(3)).await;
    let scope = h.scope("user-1");
    for key in ["a", "b", "c"] {
        put(store.as_ref(), &scope, key, "fits").await;
    }
    let refused = store.put(&scope, "d", MemoryWrite::new("one too many")).await;
    expect_quota(refused, MAX_RECORDS_PER_USER, 3, "a fourth record with max_records_per_user 3");
    assert!(get(store.as_ref(), &scope, "d").await.is_none(), "a refused write changes nothing");
    assert_eq!(keys(&list_all(store.as_ref(), &scope, 10).await), ["a", "b", "c"]);
    put(store.as_ref(), &scope, "b", "replaced at the limit").await;
    let again = store.put(&scope, "d", MemoryWrite::new("still too many")).await;
    expect_quota(again, MAX_RECORDS_PER_USER, 3, "a replacement must not free a slot");
    store.close().await.expect("close");
}

/// The limit covers every namespace of one application user, and no other user.
pub async fn quota_counts_every_namespace_of_the_user_only(h: Harness) {
    let store = h.with_quotas(records(2)).await;
    put(store.as_ref(), &h.scope("user-1"), "a", "default namespace").await;
    put(store.as_ref(), &h.scope_in("user-1", "notes"), "a", "named namespace").await;
    let refused = store.put(&h.scope_in("user-1", "other"), "a", MemoryWrite::new("third")).await;
    expect_quota(refused, MAX_RECORDS_PER_USER, 2, "namespaces of one user share the quota");
    for user in ["user-2", "user-1 ", "user-"] {
        let scope = h.scope(user);
        put(store.as_ref(), &scope, "a", "another user").await;
        put(store.as_ref(), &scope, "b", "another user").await;
    }
    store.close().await.expect("close");
}

/// Replacing a record counts only the difference in bytes: within the limit it succeeds, one
/// byte beyond it is `QuotaExceeded` and leaves the record as it was; shrinking frees space.
pub async fn quota_replace_counts_only_the_difference(h: Harness) {
    let limit = plain_bytes("a", &"x".repeat(100)) + plain_bytes("b", &"y".repeat(100));
    let store = h.with_quotas(bytes(limit)).await;
    let scope = h.scope("user-1");
    put(store.as_ref(), &scope, "a", &"x".repeat(100)).await;
    let b = put(store.as_ref(), &scope, "b", &"y".repeat(100)).await;
    put(store.as_ref(), &scope, "a", &"z".repeat(100)).await;
    let grown = store.put(&scope, "b", MemoryWrite::new("y".repeat(101))).await;
    expect_quota(grown, MAX_BYTES_PER_USER, limit, "growing a record past the byte limit");
    let kept = get(store.as_ref(), &scope, "b").await.expect("b is kept");
    assert_eq!(
        (kept.content.len(), &kept.revision),
        (100, &b.revision),
        "a refused replace changes nothing"
    );
    put(store.as_ref(), &scope, "a", &"x".repeat(40)).await;
    put(store.as_ref(), &scope, "b", &"y".repeat(160)).await;
    let full = store.put(&scope, "b", MemoryWrite::new("y".repeat(161))).await;
    expect_quota(full, MAX_BYTES_PER_USER, limit, "the space freed by shrinking is used up");
    store.close().await.expect("close");
}

/// `delete`, `delete_all` and `delete_user` free space at once.
pub async fn quota_deletes_and_erasure_free_space(h: Harness) {
    let store = h.with_quotas(records(2)).await;
    let scope = h.scope("user-1");
    let notes = h.scope_in("user-1", "notes");
    put(store.as_ref(), &scope, "a", "one").await;
    put(store.as_ref(), &notes, "b", "two").await;
    expect_quota(
        store.put(&scope, "c", MemoryWrite::new("three")).await,
        MAX_RECORDS_PER_USER,
        2,
        "full before the delete",
    );
    assert!(store.delete(&scope, "a", None).await.expect("delete"));
    put(store.as_ref(), &scope, "c", "after delete").await;
    assert_eq!(store.delete_all(&notes).await.expect("delete_all"), 1);
    put(store.as_ref(), &scope, "d", "after delete_all").await;
    expect_quota(
        store.put(&notes, "e", MemoryWrite::new("full again")).await,
        MAX_RECORDS_PER_USER,
        2,
        "full again",
    );
    assert_eq!(store.delete_user(h.app(), "user-1").await.expect("delete_user"), 2);
    put(store.as_ref(), &scope, "x", "after delete_user").await;
    put(store.as_ref(), &notes, "y", "after delete_user").await;
    store.close().await.expect("close");
}

/// Expired records still count until `purge_expired` removes them; replacing an expired
/// record adds no record.
pub async fn quota_expired_records_count_until_purged(h: Harness) {
    let store = h.with_quotas(records(2)).await;
    let scope = h.scope("user-1");
    put(store.as_ref(), &scope, "live", "stays").await;
    store
        .put(&scope, "expiring", MemoryWrite::new("goes").expires_at(h.soon()))
        .await
        .expect("put with expiry");
    h.wait_for_expiry().await;
    assert!(get(store.as_ref(), &scope, "expiring").await.is_none(), "expired");
    expect_quota(
        store.put(&scope, "new", MemoryWrite::new("no room")).await,
        MAX_RECORDS_PER_USER,
        2,
        "an expired record is still held until purged",
    );
    let (purged, _) = purge_all(store.as_ref(), &scope, 10).await;
    assert_eq!(purged, 1, "the expired record is purged");
    put(store.as_ref(), &scope, "new", "room after the purge").await;
    expect_quota(
        store.put(&scope, "short", MemoryWrite::new("x").expires_at(h.soon())).await,
        MAX_RECORDS_PER_USER,
        2,
        "full again after the purge",
    );
    store.close().await.expect("close");
}

/// The byte count is key + content + compact metadata JSON + compact source JSON: a record of
/// exactly the limit fits, one byte more does not.
pub async fn quota_bytes_count_key_content_metadata_and_source(h: Harness) {
    let metadata = json!({"tags": ["a", "b"], "note": "é \"quoted\" \\ 🦀", "n": 12});
    let source = Source {
        session_id: Some("session-ü".into()),
        invocation_id: None,
        agent: Some("agent \"x\"".into()),
    };
    let object: Metadata = serde_json::from_value(metadata.clone()).expect("an object");
    let exact = record_bytes("clé", "contenu ✓", &object, &source);
    let write = || MemoryWrite::new("contenu ✓").metadata(metadata.clone()).source(source.clone());
    let store = h.with_quotas(bytes(exact)).await;
    let scope = h.scope("user-1");
    store.put(&scope, "clé", write()).await.expect("a record of exactly the limit fits");
    store.put(&scope, "clé", write()).await.expect("replacing it with the same bytes fits");
    assert!(store.delete(&scope, "clé", None).await.expect("delete"));
    let tight = h.with_quotas(bytes(exact - 1)).await;
    expect_quota(
        tight.put(&scope, "clé", write()).await,
        MAX_BYTES_PER_USER,
        exact - 1,
        "one byte past the limit",
    );
    tight.close().await.expect("close");
    store.close().await.expect("close");
}

/// `create_only` and compare-and-set writes obey the quota too; a conflict still wins over it.
pub async fn quota_conditional_writes_obey_it(h: Harness) {
    let limit = plain_bytes("a", "aaaa") + plain_bytes("b", "bbbb");
    let store = h.with_quotas(records(2).max_bytes_per_user(limit)).await;
    let scope = h.scope("user-1");
    let a = store.put(&scope, "a", MemoryWrite::new("aaaa").create_only()).await.expect("fits");
    put(store.as_ref(), &scope, "b", "bbbb").await;
    expect_quota(
        store.put(&scope, "c", MemoryWrite::new("c").create_only()).await,
        MAX_RECORDS_PER_USER,
        2,
        "create_only past the records limit",
    );
    expect_quota(
        store
            .put(&scope, "a", MemoryWrite::new("aaaaa").expected_revision(a.revision.clone()))
            .await,
        MAX_BYTES_PER_USER,
        limit,
        "compare-and-set past the byte limit",
    );
    let same = store
        .put(&scope, "a", MemoryWrite::new("AAAA").expected_revision(a.revision.clone()))
        .await
        .expect("compare-and-set within the limit");
    match store.put(&scope, "a", MemoryWrite::new("x").expected_revision(a.revision)).await {
        Err(MemoryError::Conflict { .. }) => {}
        other => panic!("a stale revision is a Conflict whatever the quota, got {other:?}"),
    }
    assert_eq!(get(store.as_ref(), &scope, "a").await.map(|r| r.revision), Some(same.revision));
    store.close().await.expect("close");
}

const WRITERS: usize = 16;

/// 16 writers (across replicas, when the fixture has one) racing for the last 4 slots under
/// each limit: exactly 4 win, the rest get `QuotaExceeded`, and the user never holds one more.
pub async fn quota_concurrent_writers_never_overshoot(h: Harness) {
    let content = "r".repeat(50);
    let per_record = plain_bytes("k-00", &content);
    for (quota, limits, user) in [
        (MAX_RECORDS_PER_USER, records(10), "records-user"),
        (MAX_BYTES_PER_USER, bytes(per_record * 10), "bytes-user"),
    ] {
        let stores: Vec<Arc<dyn MemoryStore>> = if h.has_replica() {
            vec![h.with_quotas(limits).await, h.with_quotas(limits).await]
        } else {
            vec![h.with_quotas(limits).await]
        };
        let scope = h.scope(user);
        for i in 0..6 {
            put(stores[0].as_ref(), &scope, &format!("k-{i:02}"), &content).await;
        }
        let mut tasks = Vec::new();
        for i in 0..WRITERS {
            let store = Arc::clone(&stores[i % stores.len()]);
            let (scope, content) = (scope.clone(), content.clone());
            tasks.push(tokio::spawn(async move {
                store.put(&scope, &format!("k-{:02}", 10 + i), MemoryWrite::new(content)).await
            }));
        }
        let mut won: Vec<MemoryRecord> = Vec::new();
        for task in tasks {
            match task.await.expect("a writer panicked") {
                Ok(record) => won.push(record),
                Err(MemoryError::QuotaExceeded { quota: found, .. }) if found == quota => {}
                Err(other) => panic!("a racing writer failed with {other:?}, not QuotaExceeded"),
            }
        }
        assert_eq!(won.len(), 4, "{quota}: exactly the 4 free slots are won by {WRITERS} writers");
        let held = list_all(stores[0].as_ref(), &scope, 100).await;
        assert_eq!(held.len(), 10, "{quota}: the user holds exactly the limit, never one more");
        for store in stores {
            store.close().await.expect("close");
        }
    }
}
