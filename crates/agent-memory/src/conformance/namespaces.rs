//! `list_namespaces`: every namespace that physically holds a record, default first, then in
//! byte order.

use super::support::{expect_invalid, invalid_user_ids, namespaces_all, put};
use crate::conformance::Harness;
use crate::page::PageRequest;

/// Namespaces come back default first, then in ascending byte order, each once, at every page
/// size.
pub async fn list_namespaces_orders_default_first_then_bytes(h: Harness) {
    let names = ["B", "a", "é", "z", "~", "中", "😀", "a/b", "a:b", "A", "0", "default"];
    for ns in names.iter().rev() {
        put(h.store(), &h.scope_in("user-1", ns), "k", "x").await;
        put(h.store(), &h.scope_in("user-1", ns), "k2", "x").await;
    }
    put(h.store(), &h.scope("user-1"), "k", "x").await;
    let mut expected: Vec<Option<String>> = names.iter().map(|n| Some((*n).to_owned())).collect();
    expected.sort();
    expected.insert(0, None);
    for limit in [1, 2, 5, 100] {
        assert_eq!(
            namespaces_all(h.store(), h.app(), "user-1", limit).await,
            expected,
            "list_namespaces with limit {limit} must return the default namespace first, then \
             every named namespace once in ascending UTF-8 byte order"
        );
    }
}

/// Paging `list_namespaces` with limit 1 returns one namespace per page and a cursor while
/// namespaces remain.
pub async fn list_namespaces_pages_with_limit_one(h: Harness) {
    put(h.store(), &h.scope("user-1"), "k", "x").await;
    put(h.store(), &h.scope_in("user-1", "a"), "k", "x").await;
    put(h.store(), &h.scope_in("user-1", "b"), "k", "x").await;
    let first =
        h.store().list_namespaces(h.app(), "user-1", PageRequest::new(1)).await.expect("page 1");
    assert_eq!(first.items.len(), 1, "limit 1 returns one namespace");
    assert_eq!(first.items[0].namespace(), None, "the default namespace comes first");
    let cursor = first.next_cursor.expect("namespaces remain after the first page");
    let second = h
        .store()
        .list_namespaces(h.app(), "user-1", PageRequest::new(1).after(cursor))
        .await
        .expect("page 2");
    assert_eq!(second.items.iter().map(|s| s.namespace()).collect::<Vec<_>>(), [Some("a")]);
    assert!(second.next_cursor.is_some(), "namespace b remains: the cursor must not be None");
}

/// A user with no records, or only another user's records around, has no namespaces.
pub async fn list_namespaces_is_empty_for_unknown_user(h: Harness) {
    put(h.store(), &h.scope("user-10"), "k", "x").await;
    put(h.store(), &h.scope("user"), "k", "x").await;
    let page = h
        .store()
        .list_namespaces(h.app(), "user-1", PageRequest::default())
        .await
        .expect("list_namespaces");
    assert!(
        page.items.is_empty(),
        "a user without records has no namespaces, got {:?}",
        page.items
    );
    assert!(page.next_cursor.is_none(), "and nothing to continue");
}

/// `list_namespaces` with invalid ids is `Invalid` naming the id.
pub async fn list_namespaces_validates_ids(h: Harness) {
    for (app, user, field, what) in invalid_user_ids(h.app()) {
        expect_invalid(
            h.store().list_namespaces(app, &user, PageRequest::default()).await,
            field,
            &format!("list_namespaces with {what}"),
        );
    }
}
