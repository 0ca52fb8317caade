//! `list_applications`: every application of the store that physically holds a record, in
//! byte order.
//!
//! Cases share the datastore with every other case, so none asserts the whole listing: each
//! writes under its own [`Harness::extra_app`] ids and pages from just before them.

use super::support::{
    applications_after, applications_within, expect_invalid, purge_all, put, put_expiring,
};
use crate::conformance::Harness;
use crate::page::PageRequest;
use crate::provider::{application_cursor, key_cursor, namespace_cursor, user_cursor, CursorKind};
use crate::scope::MemoryScope;

/// Suffixes that share prefixes and leave ASCII, in an order that is neither byte order nor
/// its reverse.
const AWKWARD_SUFFIXES: [&str; 12] =
    ["ab", "a", "B", "é", "a b", "~", "中", "a-", "😀", "b", "a/b", "A"];

fn scope(app: &str, user: &str) -> MemoryScope {
    MemoryScope::new(app, user).expect("valid ids")
}

/// Application ids come back in ascending byte order, each once, at every page size.
pub async fn list_applications_orders_ids_by_bytes(h: Harness) {
    let apps: Vec<String> = AWKWARD_SUFFIXES.iter().map(|suffix| h.extra_app(suffix)).collect();
    for app in &apps {
        put(h.store(), &scope(app, "u1"), "k", "x").await;
        put(h.store(), &scope(app, "u2"), "k", "x").await;
    }
    let mut expected = apps.clone();
    expected.sort();
    for limit in [1, 2, 5, 100] {
        assert_eq!(
            applications_within(h.store(), h.app(), limit).await,
            expected,
            "list_applications with limit {limit} must return every application once, in \
             ascending UTF-8 byte order (\"a\" before \"a b\" before \"ab\")"
        );
    }
}

/// Paging `list_applications` with limit 1 returns one application per page and a cursor
/// while applications remain.
pub async fn list_applications_pages_with_limit_one(h: Harness) {
    for suffix in ["c", "a", "b"] {
        put(h.store(), &scope(&h.extra_app(suffix), "u"), "k", "x").await;
    }
    let start = applications_after(h.store(), h.app(), 1).await;
    let first = h.store().list_applications(start).await.expect("page 1");
    assert_eq!(first.items, [h.extra_app("a")], "limit 1 returns the first application alone");
    let cursor = first.next_cursor.expect("applications remain after the first page");
    let second =
        h.store().list_applications(PageRequest::new(1).after(cursor)).await.expect("page 2");
    assert_eq!(second.items, [h.extra_app("b")], "the second page continues after the first");
    assert!(second.next_cursor.is_some(), "an application remains: the cursor must not be None");
    assert_eq!(
        applications_within(h.store(), h.app(), 1).await,
        ["a", "b", "c"].map(|suffix| h.extra_app(suffix))
    );
}

/// An application whose every record has expired is listed until the records are swept.
pub async fn list_applications_includes_expired_only_applications(h: Harness) {
    let (live, expired_app) = (h.extra_app("live"), h.extra_app("expired"));
    put(h.store(), &scope(&live, "u"), "k", "x").await;
    let expired = scope(&expired_app, "u").with_namespace("ns").expect("a valid namespace");
    put_expiring(&h, &expired, "e", "x").await;
    h.wait_for_expiry().await;
    assert_eq!(
        applications_within(h.store(), h.app(), 10).await,
        [expired_app.as_str(), live.as_str()],
        "list_applications must include an application that physically holds only expired \
         records"
    );
    let (deleted, _) = purge_all(h.store(), &expired, 10).await;
    assert_eq!(deleted, 1, "purge_expired removes the expired record");
    assert_eq!(
        applications_within(h.store(), h.app(), 10).await,
        [live],
        "once swept, an application without records must no longer be listed"
    );
}

/// An application is listed while one of its users holds a record, and gone once
/// `delete_user` has erased them all; other applications stay.
pub async fn list_applications_omits_erased_applications(h: Harness) {
    let (erased, kept) = (h.extra_app("erased"), h.extra_app("kept"));
    for user in ["u1", "u2"] {
        put(h.store(), &scope(&erased, user), "k", "x").await;
        let named = scope(&erased, user).with_namespace("ns").expect("a valid namespace");
        put(h.store(), &named, "k", "x").await;
    }
    put(h.store(), &scope(&kept, "u1"), "k", "x").await;
    h.store().delete_user(&erased, "u1").await.expect("delete_user");
    assert_eq!(
        applications_within(h.store(), h.app(), 1).await,
        [erased.as_str(), kept.as_str()],
        "an application with a user left must still be listed"
    );
    h.store().delete_user(&erased, "u2").await.expect("delete_user");
    assert_eq!(
        applications_within(h.store(), h.app(), 1).await,
        [kept],
        "after delete_user of its every user the application must not be listed, and only it \
         goes"
    );
}

/// Bad limits, prefixes and cursors (malformed ones, and those of other operations) are
/// `Invalid` naming the field, before any I/O.
pub async fn list_applications_validates_input(h: Harness) {
    let user = h.scope("u1");
    put(h.store(), &user, "k", "x").await;
    let store = h.store();
    for limit in [0, 101] {
        let result = store.list_applications(PageRequest::new(limit)).await;
        expect_invalid(result, "limit", &format!("list_applications with limit {limit}"));
    }
    let prefixed = PageRequest::default().prefix("a");
    let result = store.list_applications(prefixed).await;
    expect_invalid(result, "prefix", "list_applications with a prefix");
    let long = "a".repeat(129);
    for (position, what) in [("", "an empty application id"), (long.as_str(), "a 129-byte one")] {
        let bad = PageRequest::default().after(application_cursor(position));
        let result = store.list_applications(bad).await;
        expect_invalid(result, "cursor", &format!("list_applications after {what}"));
    }
    let foreign = [
        ("list_users", user_cursor(h.app(), "u1")),
        ("list_namespaces", namespace_cursor(h.app(), "u1", "")),
        ("list", key_cursor(CursorKind::List, &user, "k")),
    ];
    for (operation, cursor) in foreign {
        let result = store.list_applications(PageRequest::default().after(cursor)).await;
        expect_invalid(result, "cursor", &format!("list_applications with a {operation} cursor"));
    }
    let applications = || PageRequest::default().after(application_cursor(h.app()));
    let result = store.list_users(h.app(), applications()).await;
    expect_invalid(result, "cursor", "list_users with a list_applications cursor");
    let result = store.list_namespaces(h.app(), "u1", applications()).await;
    expect_invalid(result, "cursor", "list_namespaces with a list_applications cursor");
    let result = store.list(&user, applications()).await;
    expect_invalid(result, "cursor", "list with a list_applications cursor");
}
