//! `list_users`: every user of one application that physically holds a record, in byte order.

use super::support::{expect_invalid, purge_all, put, put_expiring, users_all};
use crate::conformance::Harness;
use crate::page::PageRequest;
use crate::provider::{namespace_cursor, user_cursor};
use crate::scope::MemoryScope;

/// Ids that share prefixes and leave ASCII, in an order that is neither byte order nor its
/// reverse.
const AWKWARD_IDS: [&str; 12] =
    ["ab", "a", "B", "é", "a b", "~", "中", "a-", "😀", "b", "a/b", "A"];

fn sorted(ids: &[&str]) -> Vec<String> {
    let mut ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
    ids.sort();
    ids
}

/// User ids come back in ascending byte order, each once, at every page size.
pub async fn list_users_orders_ids_by_bytes(h: Harness) {
    for user in AWKWARD_IDS {
        put(h.store(), &h.scope(user), "k", "x").await;
        put(h.store(), &h.scope(user), "k2", "x").await;
    }
    let expected = sorted(&AWKWARD_IDS);
    for limit in [1, 2, 5, 100] {
        assert_eq!(
            users_all(h.store(), h.app(), limit).await,
            expected,
            "list_users with limit {limit} must return every user once in ascending UTF-8 byte \
             order (\"a\" before \"a b\" before \"ab\")"
        );
    }
}

/// Paging `list_users` with limit 1 returns one user per page and a cursor while users remain.
pub async fn list_users_pages_with_limit_one(h: Harness) {
    for user in ["c", "a", "b"] {
        put(h.store(), &h.scope(user), "k", "x").await;
    }
    let first = h.store().list_users(h.app(), PageRequest::new(1)).await.expect("page 1");
    assert_eq!(first.items, ["a"], "limit 1 returns the first user alone");
    let cursor = first.next_cursor.expect("users remain after the first page");
    let second =
        h.store().list_users(h.app(), PageRequest::new(1).after(cursor)).await.expect("page 2");
    assert_eq!(second.items, ["b"], "the second page continues after the first user");
    assert!(second.next_cursor.is_some(), "user c remains: the cursor must not be None");
    assert_eq!(users_all(h.store(), h.app(), 1).await, ["a", "b", "c"]);
}

/// A user whose every record has expired is listed until the records are swept.
pub async fn list_users_includes_expired_only_users(h: Harness) {
    put(h.store(), &h.scope("live"), "k", "x").await;
    let expired = h.scope_in("expired", "ns");
    put_expiring(&h, &expired, "e", "x").await;
    h.wait_for_expiry().await;
    assert_eq!(
        users_all(h.store(), h.app(), 10).await,
        ["expired", "live"],
        "list_users must include a user who physically holds only expired records"
    );
    let (deleted, _) = purge_all(h.store(), &expired, 10).await;
    assert_eq!(deleted, 1, "purge_expired removes the expired record");
    assert_eq!(
        users_all(h.store(), h.app(), 10).await,
        ["live"],
        "once swept, a user without records must no longer be listed"
    );
}

/// After `delete_user` the user is gone from the listing; the others stay.
pub async fn list_users_omits_erased_users(h: Harness) {
    for user in ["u1", "u2", "u3"] {
        put(h.store(), &h.scope(user), "k", "x").await;
        put(h.store(), &h.scope_in(user, "ns"), "k", "x").await;
    }
    h.store().delete_user(h.app(), "u2").await.expect("delete_user");
    assert_eq!(
        users_all(h.store(), h.app(), 1).await,
        ["u1", "u3"],
        "after delete_user the user must not be listed, and only that user goes"
    );
    for user in ["u1", "u3"] {
        h.store().delete_user(h.app(), user).await.expect("delete_user");
    }
    let page = h.store().list_users(h.app(), PageRequest::default()).await.expect("list_users");
    assert!(page.items.is_empty(), "every user erased: none listed, got {:?}", page.items);
    assert!(page.next_cursor.is_none(), "and nothing to continue");
}

/// A user whose records are all in named namespaces is listed like any other.
pub async fn list_users_includes_users_with_only_named_namespaces(h: Harness) {
    put(h.store(), &h.scope_in("named-only", "notes"), "k", "x").await;
    put(h.store(), &h.scope_in("named-only", "prefs"), "k", "x").await;
    put(h.store(), &h.scope("default-only"), "k", "x").await;
    assert_eq!(
        users_all(h.store(), h.app(), 10).await,
        ["default-only", "named-only"],
        "list_users must list a user whose records are only in named namespaces, once"
    );
}

/// Users of another application are never listed, even when one application id is a prefix
/// of the other.
pub async fn list_users_never_lists_other_applications(h: Harness) {
    let longer = format!("{}x", h.app());
    let shorter = h.app()[..h.app().len() - 1].to_owned();
    put(h.store(), &h.scope("mine"), "k", "x").await;
    for (app, user) in [(&longer, "longer-user"), (&shorter, "shorter-user")] {
        let scope = MemoryScope::new(app.as_str(), user).expect("valid ids");
        put(h.store(), &scope, "k", "x").await;
    }
    assert_eq!(
        users_all(h.store(), h.app(), 10).await,
        ["mine"],
        "list_users must list only the application's own users, not those of an application \
         whose id extends or shortens it"
    );
    assert_eq!(users_all(h.store(), &longer, 10).await, ["longer-user"]);
    assert_eq!(users_all(h.store(), &shorter, 10).await, ["shorter-user"]);
    for (app, user) in [(&longer, "longer-user"), (&shorter, "shorter-user")] {
        h.store().delete_user(app, user).await.expect("delete_user");
    }
}

/// An application without records has no users and no cursor.
pub async fn list_users_is_empty_for_an_empty_application(h: Harness) {
    let page = h.store().list_users(h.app(), PageRequest::default()).await.expect("list_users");
    assert!(page.items.is_empty(), "no records, no users: got {:?}", page.items);
    assert!(page.next_cursor.is_none(), "and nothing to continue");
}

/// Bad ids, limits, prefixes and cursors are `Invalid` naming the field, before any I/O.
pub async fn list_users_validates_input(h: Harness) {
    put(h.store(), &h.scope("u1"), "k", "x").await;
    let store = h.store();
    let long = "a".repeat(129);
    for (app, what) in [("", "an empty application id"), (long.as_str(), "a 129-byte one")] {
        let result = store.list_users(app, PageRequest::default()).await;
        expect_invalid(result, "application_id", &format!("list_users with {what}"));
    }
    for limit in [0, 101] {
        let result = store.list_users(h.app(), PageRequest::new(limit)).await;
        expect_invalid(result, "limit", &format!("list_users with limit {limit}"));
    }
    let prefixed = PageRequest::default().prefix("u");
    expect_invalid(store.list_users(h.app(), prefixed).await, "prefix", "list_users with a prefix");
    let foreign = PageRequest::default().after(user_cursor(&format!("{}x", h.app()), "u1"));
    let result = store.list_users(h.app(), foreign).await;
    expect_invalid(result, "cursor", "list_users with another application's cursor");
    let namespaces = PageRequest::default().after(namespace_cursor(h.app(), "u1", ""));
    let result = store.list_users(h.app(), namespaces).await;
    expect_invalid(result, "cursor", "list_users with a list_namespaces cursor");
    let users = PageRequest::default().after(user_cursor(h.app(), "u1"));
    let result = store.list_namespaces(h.app(), "u1", users).await;
    expect_invalid(result, "cursor", "list_namespaces with a list_users cursor");
}
