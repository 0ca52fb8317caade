//! Conditional writes: `expected_revision`, `create_only`, conditional deletes, and revisions
//! that are never reused.

use serde_json::json;

use super::support::{
    assert_distinct, expect_conflict, get, list_all, namespaces_all, put, put_every_field,
    put_expiring,
};
use crate::conformance::Harness;
use crate::record::{MemoryRecord, Revision, Source};
use crate::scope::MemoryScope;
use crate::write::MemoryWrite;

/// Writes `content` over `previous` on condition of its revision, panicking with `what` on an
/// error.
async fn replace(
    h: &Harness,
    scope: &MemoryScope,
    previous: &MemoryRecord,
    content: &str,
    what: &str,
) -> MemoryRecord {
    let write = MemoryWrite::new(content).expected_revision(previous.revision.clone());
    h.store().put(scope, &previous.key, write).await.expect(what)
}

/// Writes `content` at "k" with `create_only`, panicking with `what` on an error.
async fn create(h: &Harness, scope: &MemoryScope, content: &str, what: &str) -> MemoryRecord {
    h.store().put(scope, "k", MemoryWrite::new(content).create_only()).await.expect(what)
}

/// A write with the live record's revision replaces it and gets a new revision.
pub async fn expected_revision_replaces_live_record(h: Harness) {
    let scope = h.scope("user-1");
    let first = put(h.store(), &scope, "k", "one").await;
    let second =
        replace(&h, &scope, &first, "two", "a write with the live revision must succeed").await;
    assert_eq!(second.content, "two");
    assert_ne!(second.revision, first.revision, "a conditional write must get a new revision");
    assert_eq!(second.created_at, first.created_at, "a conditional replace keeps created_at");
    assert_eq!(
        get(h.store(), &scope, "k").await,
        Some(second.clone()),
        "get shows the new version"
    );
    let third = replace(&h, &scope, &second, "three", "chaining revisions must work").await;
    assert_eq!(third.content, "three");
}

/// A write with a stale revision is a `Conflict` and changes nothing.
pub async fn stale_revision_conflicts_and_changes_nothing(h: Harness) {
    let scope = h.scope("user-1");
    let first = put(h.store(), &scope, "k", "one").await;
    let second = put(h.store(), &scope, "k", "two").await;
    let attempt = MemoryWrite::new("three")
        .metadata(json!({"changed": true}))
        .expires_at(h.now().saturating_add(std::time::Duration::from_secs(3600)))
        .source(Source::default().agent("intruder"))
        .expected_revision(first.revision.clone());
    expect_conflict(h.store().put(&scope, "k", attempt).await, "put with a stale revision");
    assert_eq!(
        get(h.store(), &scope, "k").await,
        Some(second),
        "a failed conditional write must leave the record exactly as it was (revision, \
         timestamps, content, metadata, expiry, source)"
    );
}

/// A write expecting a revision of a deleted record is a `Conflict` and writes nothing.
pub async fn expected_revision_conflicts_after_delete(h: Harness) {
    let scope = h.scope("user-1");
    let first = put(h.store(), &scope, "k", "one").await;
    assert!(h.store().delete(&scope, "k", None).await.expect("delete"));
    expect_conflict(
        h.store()
            .put(&scope, "k", MemoryWrite::new("resurrected").expected_revision(first.revision))
            .await,
        "put expecting the revision of a deleted record",
    );
    assert!(
        get(h.store(), &scope, "k").await.is_none(),
        "a failed write must not re-create the key"
    );
    assert!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await.is_empty(),
        "a failed conditional write must leave nothing behind (list_namespaces is empty)"
    );
}

/// A write expecting the revision of an expired record is a `Conflict`.
pub async fn expected_revision_conflicts_after_expiry(h: Harness) {
    let scope = h.scope("user-1");
    let record = put_expiring(&h, &scope, "k", "short-lived").await;
    h.wait_for_expiry().await;
    expect_conflict(
        h.store()
            .put(&scope, "k", MemoryWrite::new("late").expected_revision(record.revision))
            .await,
        "put expecting the revision of an expired record",
    );
    assert!(get(h.store(), &scope, "k").await.is_none(), "the expired record stays invisible");
}

/// A write expecting a revision for a key that never existed is a `Conflict`, even with a
/// revision that is live on another key or in another scope.
pub async fn expected_revision_conflicts_when_key_never_existed(h: Harness) {
    let scope = h.scope("user-1");
    let other_key = put(h.store(), &scope, "other", "x").await;
    let other_user = put(h.store(), &h.scope("user-2"), "k", "x").await;
    let made_up = Revision::new("made-up-revision-1").expect("a valid token");
    for (revision, what) in [
        (other_key.revision, "a revision live on another key"),
        (other_user.revision, "a revision live on the same key of another user"),
        (made_up, "a revision the store never issued"),
    ] {
        expect_conflict(
            h.store().put(&scope, "k", MemoryWrite::new("v").expected_revision(revision)).await,
            &format!("put on a never-written key expecting {what}"),
        );
        assert!(get(h.store(), &scope, "k").await.is_none(), "a failed write created the key");
    }
}

/// `create_only` writes a key that has no live record.
pub async fn create_only_writes_absent_key(h: Harness) {
    let scope = h.scope("user-1");
    let record = create(&h, &scope, "first", "create_only on an absent key must succeed").await;
    assert_eq!(record.created_at, record.updated_at, "a created record is new");
    assert_eq!(get(h.store(), &scope, "k").await, Some(record));
    // A deleted key is absent again.
    assert!(h.store().delete(&scope, "k", None).await.expect("delete"));
    create(&h, &scope, "second", "create_only after delete must succeed").await;
}

/// `create_only` on a live key is a `Conflict` and changes nothing.
pub async fn create_only_conflicts_on_live_key(h: Harness) {
    let scope = h.scope("user-1");
    let existing = put_every_field(h.store(), &scope, "k").await;
    let attempt = MemoryWrite::new("replacement")
        .metadata(json!({"b": 2}))
        .source(Source::default().agent("late"))
        .create_only();
    expect_conflict(h.store().put(&scope, "k", attempt).await, "create_only on a live key");
    assert_eq!(
        get(h.store(), &scope, "k").await,
        Some(existing),
        "a failed create_only must leave the live record exactly as it was"
    );
}

/// `create_only` over an expired record succeeds and counts as a new record.
pub async fn create_only_succeeds_over_expired_key(h: Harness) {
    let scope = h.scope("user-1");
    let old = put_expiring(&h, &scope, "k", "old").await;
    h.wait_for_expiry().await;
    let what = "create_only over an expired record must succeed: expired records are absent";
    let new = create(&h, &scope, "new", what).await;
    assert_ne!(new.revision, old.revision, "the new record needs a new revision");
    assert!(new.created_at > old.created_at, "the new record gets a fresh created_at");
    assert_eq!(new.created_at, new.updated_at, "a record replacing an expired one is new");
    assert_eq!(new.expires_at, None, "the new record has no expiry");
}

/// `delete` with the live revision deletes; with a stale revision it is a `Conflict` and the
/// record stays.
pub async fn delete_with_revision_checks_it(h: Harness) {
    let scope = h.scope("user-1");
    let first = put(h.store(), &scope, "k", "one").await;
    let second = put(h.store(), &scope, "k", "two").await;
    expect_conflict(
        h.store().delete(&scope, "k", Some(&first.revision)).await,
        "delete with a stale revision",
    );
    assert_eq!(
        get(h.store(), &scope, "k").await,
        Some(second.clone()),
        "a delete that conflicted must leave the record in place"
    );
    assert_eq!(list_all(h.store(), &scope, 10).await.len(), 1, "list still shows the record");
    assert!(
        h.store().delete(&scope, "k", Some(&second.revision)).await.expect("delete"),
        "delete with the live revision must delete and return true"
    );
    assert!(get(h.store(), &scope, "k").await.is_none(), "the record is gone");
}

/// `delete` with a revision of a key that is absent or expired is a `Conflict`.
pub async fn delete_with_revision_of_missing_record_conflicts(h: Harness) {
    let scope = h.scope("user-1");
    let gone = put(h.store(), &scope, "gone", "x").await;
    assert!(h.store().delete(&scope, "gone", None).await.expect("delete"));
    expect_conflict(
        h.store().delete(&scope, "gone", Some(&gone.revision)).await,
        "delete expecting the revision of an already deleted record",
    );
    let never = Revision::new("never-issued").expect("valid token");
    expect_conflict(
        h.store().delete(&h.scope("nobody"), "k", Some(&never)).await,
        "delete with a revision for a user that has no records",
    );
    let expiring = put_expiring(&h, &scope, "expiring", "x").await;
    h.wait_for_expiry().await;
    expect_conflict(
        h.store().delete(&scope, "expiring", Some(&expiring.revision)).await,
        "delete expecting the revision of an expired record",
    );
}

/// A key never gets the same revision twice: not after delete, expiry, purge, `delete_all` or
/// `delete_user` and re-create, and an old revision never matches the new record.
pub async fn revisions_are_never_reused(h: Harness) {
    let scope = h.scope("user-1");
    let write = |key: &'static str, write: MemoryWrite| {
        let store = h.store();
        let scope = scope.clone();
        async move { store.put(&scope, key, write).await.expect("put") }
    };

    let mut seen: Vec<Revision> = Vec::new();
    seen.push(write("k", MemoryWrite::new("v1")).await.revision);
    seen.push(write("k", MemoryWrite::new("v2")).await.revision);
    assert!(h.store().delete(&scope, "k", None).await.expect("delete"));
    seen.push(write("k", MemoryWrite::new("after delete")).await.revision);
    assert_eq!(h.store().delete_all(&scope).await.expect("delete_all"), 1);
    seen.push(write("k", MemoryWrite::new("after delete_all")).await.revision);
    assert_eq!(h.store().delete_user(h.app(), "user-1").await.expect("delete_user"), 1);
    seen.push(write("k", MemoryWrite::new("after delete_user")).await.revision);
    seen.push(write("k", MemoryWrite::new("expiring").expires_at(h.soon())).await.revision);

    // A second key goes through expiry and purge in the same wait.
    let mut seen_purged: Vec<Revision> = Vec::new();
    seen_purged.push(write("p", MemoryWrite::new("p1")).await.revision);
    seen_purged.push(write("p", MemoryWrite::new("p2").expires_at(h.soon())).await.revision);
    h.wait_for_expiry().await;
    let last = write("k", MemoryWrite::new("after expiry")).await;
    seen.push(last.revision.clone());
    let (purged, _) = super::support::purge_all(h.store(), &scope, 100).await;
    assert_eq!(purged, 1, "purge_expired must remove the expired record at \"p\"");
    let last_purged = write("p", MemoryWrite::new("after purge")).await;
    seen_purged.push(last_purged.revision.clone());

    assert_distinct(&seen, "key \"k\" across delete, delete_all, delete_user and expiry");
    assert_distinct(&seen_purged, "key \"p\" across expiry and purge");
    for (key, revisions, last) in [("k", &seen, &last), ("p", &seen_purged, &last_purged)] {
        for old in &revisions[..revisions.len() - 1] {
            expect_conflict(
                h.store()
                    .put(&scope, key, MemoryWrite::new("aba").expected_revision(old.clone()))
                    .await,
                &format!("put on {key:?} expecting a revision from before the re-create (ABA)"),
            );
        }
        assert_eq!(
            get(h.store(), &scope, key).await.as_ref(),
            Some(last),
            "the failed ABA writes on {key:?} must change nothing"
        );
    }
}
