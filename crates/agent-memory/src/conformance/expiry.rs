//! Expiry: expired records are invisible to reads the moment `expires_at` passes, but stay
//! physically present (and counted by erasure) until something removes them.

use std::time::Duration;

use super::support::{
    expect_invalid, get, keys, list_all, namespaces_all, purge_all, put, put_expiring, search_all,
};
use crate::conformance::Harness;
use crate::page::PageRequest;
use crate::scope::MemoryScope;
use crate::write::MemoryWrite;

/// An expired record disappears from `get`, `list` and `search`; live neighbours stay.
pub async fn expired_record_is_invisible_to_reads(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "a-live", "needle live").await;
    put_expiring(&h, &scope, "b-expiring", "needle expiring").await;
    put(h.store(), &scope, "c-live", "needle live too").await;
    let before = get(h.store(), &scope, "b-expiring").await;
    assert!(before.is_some(), "a record is visible before its expiry");
    assert!(before.and_then(|r| r.expires_at).is_some(), "expires_at must be stored");
    assert_eq!(list_all(h.store(), &scope, 10).await.len(), 3, "all three are live before expiry");

    h.wait_for_expiry().await;
    assert!(
        get(h.store(), &scope, "b-expiring").await.is_none(),
        "get must return None once expires_at has passed (by the datastore's clock)"
    );
    assert_eq!(
        keys(&list_all(h.store(), &scope, 1).await),
        ["a-live", "c-live"],
        "list must skip expired records, also across pages"
    );
    assert_eq!(
        keys(&search_all(h.store(), &scope, "needle", 1).await),
        ["a-live", "c-live"],
        "search must skip expired records"
    );
    assert!(
        search_all(h.store(), &scope, "expiring", 10).await.is_empty(),
        "search must not match an expired record's content"
    );
}

/// A record expiring at a given instant is visible just before it and invisible at it.
pub async fn expiry_boundary_is_exact(h: Harness) {
    if !h.has_manual_clock() {
        // Without an injected clock the instant cannot be hit exactly; the sleeping cases
        // cover expiry for such providers. Still check the record is live well before expiry.
        let scope = h.scope("user-1");
        let at = h.now().saturating_add(Duration::from_secs(3600));
        h.store()
            .put(&scope, "k", MemoryWrite::new("v").expires_at(at))
            .await
            .expect("put with a far expiry");
        assert!(get(h.store(), &scope, "k").await.is_some(), "a record before expiry is live");
        return;
    }
    let scope = h.scope("user-1");
    let at = h.now().saturating_add(Duration::from_secs(10));
    h.store().put(&scope, "k", MemoryWrite::new("v").expires_at(at)).await.expect("put");
    h.advance(Duration::from_micros(9_999_999)).await;
    assert!(get(h.store(), &scope, "k").await.is_some(), "one microsecond before expires_at: live");
    h.advance(Duration::from_micros(1)).await;
    assert!(
        get(h.store(), &scope, "k").await.is_none(),
        "at exactly expires_at the record is expired (live means expires_at > now)"
    );
}

/// Panics unless nothing of `user-1` is physically left after `what`: no namespace is listed,
/// and `delete_all` of `scope` finds nothing to remove, expired records included.
async fn assert_physically_empty(h: &Harness, scope: &MemoryScope, what: &str) {
    assert!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await.is_empty(),
        "after {what} no namespace of the user may remain, expired records included"
    );
    let left = h.store().delete_all(scope).await.expect("delete_all");
    assert_eq!(left, 0, "after {what} nothing is left for delete_all to remove");
}

/// `delete_all` erases expired records too and counts them.
pub async fn delete_all_counts_expired_records(h: Harness) {
    let scope = h.scope_in("user-1", "ns");
    put(h.store(), &scope, "live", "x").await;
    for key in ["e1", "e2"] {
        put_expiring(&h, &scope, key, "x").await;
    }
    h.wait_for_expiry().await;
    assert_eq!(
        h.store().delete_all(&scope).await.expect("delete_all"),
        3,
        "delete_all must count expired records it physically removed"
    );
    assert_physically_empty(&h, &scope, "delete_all").await;
}

/// `delete_user` erases expired records too and counts them.
pub async fn delete_user_counts_expired_records(h: Harness) {
    put(h.store(), &h.scope("user-1"), "live", "x").await;
    for ns in ["a", "b"] {
        put_expiring(&h, &h.scope_in("user-1", ns), "e", "x").await;
    }
    h.wait_for_expiry().await;
    assert_eq!(
        h.store().delete_user(h.app(), "user-1").await.expect("delete_user"),
        3,
        "delete_user must count expired records it physically removed"
    );
    assert_physically_empty(&h, &h.scope_in("user-1", "a"), "delete_user").await;
}

/// A namespace holding only expired records is still listed by `list_namespaces` until purged.
pub async fn list_namespaces_includes_expired_only_namespaces(h: Harness) {
    put(h.store(), &h.scope("user-1"), "live", "x").await;
    let expired_ns = h.scope_in("user-1", "expired-only");
    put_expiring(&h, &expired_ns, "e", "x").await;
    h.wait_for_expiry().await;
    assert!(list_all(h.store(), &expired_ns, 10).await.is_empty(), "nothing live in it");
    assert_eq!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await,
        vec![None, Some("expired-only".to_owned())],
        "list_namespaces must include a namespace that physically holds only expired records"
    );
    let (deleted, _) = purge_all(h.store(), &expired_ns, 10).await;
    assert_eq!(deleted, 1, "purge_expired removes the expired record");
    assert_eq!(
        namespaces_all(h.store(), h.app(), "user-1", 10).await,
        vec![None],
        "once purged, the emptied namespace must no longer be listed"
    );
}

/// `delete` of an expired record returns false but physically removes it.
pub async fn delete_of_expired_record_returns_false(h: Harness) {
    let scope = h.scope_in("user-1", "ns");
    put_expiring(&h, &scope, "k", "x").await;
    h.wait_for_expiry().await;
    assert!(
        !h.store().delete(&scope, "k", None).await.expect("delete"),
        "delete of an expired record must return false (no live record existed)"
    );
    assert_physically_empty(&h, &scope, "delete of the expired record").await;
}

/// `purge_expired` removes exactly the expired records and leaves live ones alone.
pub async fn purge_removes_only_expired_records(h: Harness) {
    let scope = h.scope("user-1");
    let other = h.scope_in("user-1", "other");
    let mut live = Vec::new();
    for i in 0..5 {
        let key = format!("k{i}");
        if i % 2 == 0 {
            put_expiring(&h, &scope, &key, "x").await;
        } else {
            live.push(put(h.store(), &scope, &key, "live").await);
        }
    }
    let far = h.now().saturating_add(Duration::from_secs(3600));
    live.push(
        h.store()
            .put(&scope, "k9-far", MemoryWrite::new("x").expires_at(far))
            .await
            .expect("put with a far expiry"),
    );
    put_expiring(&h, &other, "k0", "x").await;
    h.wait_for_expiry().await;

    let (deleted, _) = purge_all(h.store(), &scope, 100).await;
    assert_eq!(deleted, 3, "purge_expired must remove the three expired records, no more");
    assert_eq!(
        list_all(h.store(), &scope, 100).await,
        live,
        "purge_expired must leave live records (and ones expiring later) unchanged"
    );
    assert_eq!(
        h.store().delete_all(&other).await.expect("delete_all"),
        1,
        "purge_expired must not touch another namespace"
    );
    let (again, _) = purge_all(h.store(), &scope, 100).await;
    assert_eq!(again, 0, "a second sweep finds nothing to remove");
    let empty = h.scope_in("user-1", "never-written");
    let page = h.store().purge_expired(&empty, PageRequest::default()).await.expect("purge");
    assert_eq!(page.deleted, 0, "sweeping an empty namespace removes nothing");
    assert!(page.next_cursor.is_none(), "sweeping an empty namespace has nothing to continue");
}

/// `purge_expired` with limits 1 and 2 over mixed keys sweeps everything by following cursors,
/// even through calls that delete nothing.
pub async fn purge_pages_with_small_limits(h: Harness) {
    let mut namespaces = Vec::new();
    for (ns, limit) in [("limit-1", 1), ("limit-2", 2)] {
        let scope = h.scope_in("user-1", ns);
        // Live keys first, so the first sweeps delete nothing and must still continue.
        for key in ["a", "b", "c", "d"] {
            put(h.store(), &scope, key, "live").await;
        }
        for key in ["e", "f", "g"] {
            put_expiring(&h, &scope, key, "x").await;
        }
        put(h.store(), &scope, "h", "live").await;
        put_expiring(&h, &scope, "i", "x").await;
        namespaces.push((scope, limit));
    }
    h.wait_for_expiry().await;
    for (scope, limit) in namespaces {
        let first = h.store().purge_expired(&scope, PageRequest::new(limit)).await.expect("purge");
        assert_eq!(first.deleted, 0, "the first {limit} keys are live: nothing to delete yet");
        assert!(
            first.next_cursor.is_some(),
            "purge_expired must return a cursor while keys remain, even when deleted is 0"
        );
        let (deleted, calls) = purge_all(h.store(), &scope, limit).await;
        assert_eq!(
            deleted, 4,
            "purge_expired with limit {limit} must remove all four expired records in total"
        );
        assert!(
            calls >= 9_usize.div_ceil(limit),
            "purge_expired may inspect at most {limit} keys per call, but swept 9 keys in {calls} calls"
        );
        assert_eq!(
            keys(&list_all(h.store(), &scope, 100).await),
            ["a", "b", "c", "d", "h"],
            "purge_expired with limit {limit} must leave the live records"
        );
    }
}

/// Writing over an expired record creates a new record: fresh `created_at`, new revision.
pub async fn replacing_expired_record_counts_as_new(h: Harness) {
    let scope = h.scope("user-1");
    let old = put_expiring(&h, &scope, "k", "old").await;
    h.wait_for_expiry().await;
    let before = h.now();
    let new = put(h.store(), &scope, "k", "new").await;
    assert!(
        new.created_at > old.created_at,
        "replacing an expired record must not keep its created_at"
    );
    assert_eq!(new.created_at, new.updated_at, "the replacement is a new record");
    if h.has_manual_clock() {
        assert_eq!(new.created_at, before, "created_at must be now");
    }
    assert_ne!(new.revision, old.revision, "the replacement gets a new revision");
    assert_eq!(new.expires_at, None, "the replacement has no expiry");
    assert_eq!(get(h.store(), &scope, "k").await, Some(new), "get shows the replacement");
}

/// An `expires_at` now or in the past is `Invalid` and writes nothing.
pub async fn expiry_must_be_in_the_future(h: Harness) {
    let scope = h.scope("user-1");
    let existing = put(h.store(), &scope, "existing", "x").await;
    let now = h.now();
    for (at, what) in [
        (now, "expires_at equal to now"),
        (now.saturating_sub(Duration::from_secs(1)), "expires_at one second ago"),
        (crate::time::Timestamp::EPOCH, "expires_at at the epoch"),
    ] {
        for key in ["new", "existing"] {
            expect_invalid(
                h.store().put(&scope, key, MemoryWrite::new("v").expires_at(at)).await,
                "expires_at",
                &format!("put {key:?} with {what}"),
            );
        }
    }
    assert!(get(h.store(), &scope, "new").await.is_none(), "an invalid write must write nothing");
    assert_eq!(
        get(h.store(), &scope, "existing").await,
        Some(existing),
        "an invalid write must leave the existing record unchanged"
    );
}
