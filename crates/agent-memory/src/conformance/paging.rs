//! Paging: every record exactly once in UTF-8 byte order, honest cursors, checked limits, and
//! cursors that only work where they came from.

use super::support::{
    byte_sorted, expect_invalid, expect_refused_everywhere, keys, list_all, list_request_all, put,
};
use crate::conformance::Harness;
use crate::page::{Cursor, CursorKind, PageRequest};
use crate::provider::{key_cursor, namespace_cursor};
use crate::scope::MemoryScope;

/// Keys whose UTF-8 byte order differs from case-insensitive, locale or UTF-16 order.
const ORDER_KEYS: &[&str] = &[
    "B", "a", "é", "z", "~", "中", "😀", "a/b", "a:b", "A", "a b", "a-b", "a_b", "a.b", "aa", "ab",
    "Z", "0", "10", "9", "\u{ff5e}", "\u{fffd}", "e\u{301}", "ä", "{", "%", "\\", "'",
];

/// `list` returns every record exactly once, in ascending UTF-8 byte order, at every page size.
pub async fn list_returns_every_record_once_in_byte_order(h: Harness) {
    let scope = h.scope("user-1");
    // Write in a scrambled order so insertion order cannot pass for key order.
    for key in ORDER_KEYS.iter().rev() {
        put(h.store(), &scope, key, &format!("content of {key}")).await;
    }
    let expected = byte_sorted(ORDER_KEYS.iter().copied());
    for limit in [1, 2, 3, 7, 100] {
        let listed = list_all(h.store(), &scope, limit).await;
        assert_eq!(
            keys(&listed),
            expected,
            "list with limit {limit} must return each key once in ascending UTF-8 byte order \
             (PostgreSQL needs COLLATE \"C\"; no case folding, no locale, no UTF-16 order)"
        );
        for record in &listed {
            assert_eq!(
                record.content,
                format!("content of {}", record.key),
                "list returned a wrong record"
            );
        }
    }
}

/// `next_cursor` is `None` only when nothing is left, including on a full last page.
pub async fn next_cursor_is_none_only_when_nothing_is_left(h: Harness) {
    let scope = h.scope("user-1");
    let empty = h.store().list(&scope, PageRequest::new(10)).await.expect("list");
    assert!(empty.items.is_empty(), "an empty scope lists nothing");
    assert!(empty.next_cursor.is_none(), "an empty scope has no next page");

    for i in 0..6 {
        put(h.store(), &scope, &format!("k{i}"), "x").await;
    }
    for limit in [1, 2, 3, 5, 6, 7] {
        let mut page = PageRequest::new(limit);
        let mut seen = 0;
        loop {
            let result = h.store().list(&scope, page.clone()).await.expect("list");
            seen += result.items.len();
            match result.next_cursor {
                Some(cursor) => page = page.after(cursor),
                None => {
                    assert_eq!(
                        seen, 6,
                        "list with limit {limit} returned next_cursor None after {seen} of 6 \
                         records: None must mean nothing is left"
                    );
                    break;
                }
            }
            assert!(seen <= 6, "list with limit {limit} returned more records than exist");
        }
    }
    let short = h.store().list(&scope, PageRequest::new(7)).await.expect("list");
    assert_eq!(short.items.len(), 6, "a page larger than the scope returns every record");
    assert!(short.next_cursor.is_none(), "a page that holds every record has no next page");
}

/// `limit` must be 1..=100 for `list`, `search`, `purge_expired` and `list_namespaces`.
pub async fn page_limit_is_checked(h: Harness) {
    let scope = h.scope("user-1");
    for i in 0..3 {
        put(h.store(), &scope, &format!("k{i}"), "needle").await;
    }
    let store = h.store();
    for limit in [0, 101, usize::MAX] {
        let what = |op: &str| format!("{op} with limit {limit}");
        expect_invalid(store.list(&scope, PageRequest::new(limit)).await, "limit", &what("list"));
        expect_invalid(
            store.search(&scope, "needle", PageRequest::new(limit)).await,
            "limit",
            &what("search"),
        );
        expect_invalid(
            store.purge_expired(&scope, PageRequest::new(limit)).await,
            "limit",
            &what("purge_expired"),
        );
        expect_invalid(
            store.list_namespaces(h.app(), "user-1", PageRequest::new(limit)).await,
            "limit",
            &what("list_namespaces"),
        );
    }
    for limit in [1, 100] {
        let list =
            store.list(&scope, PageRequest::new(limit)).await.expect("list accepts 1 and 100");
        assert_eq!(list.items.len(), limit.min(3), "list with limit {limit}");
        let found = store
            .search(&scope, "needle", PageRequest::new(limit))
            .await
            .expect("search accepts 1 and 100");
        assert!(found.items.len() <= limit, "search with limit {limit}");
        store
            .purge_expired(&scope, PageRequest::new(limit))
            .await
            .expect("purge accepts 1 and 100");
        let ns = store
            .list_namespaces(h.app(), "user-1", PageRequest::new(limit))
            .await
            .expect("list_namespaces accepts 1 and 100");
        assert_eq!(ns.items.len(), 1, "list_namespaces with limit {limit}");
    }
}

/// A cursor only continues the operation and scope that produced it; others are `Invalid`.
pub async fn foreign_cursors_are_invalid(h: Harness) {
    let scope = h.scope("user-1");
    for i in 0..3 {
        put(h.store(), &scope, &format!("k{i}"), "needle").await;
    }
    put(h.store(), &h.scope_in("user-1", "ns"), "k0", "needle").await;
    let store = h.store();
    let list_cursor = store
        .list(&scope, PageRequest::new(1))
        .await
        .expect("list")
        .next_cursor
        .expect("a cursor: more records follow");
    let ns_cursor = store
        .list_namespaces(h.app(), "user-1", PageRequest::new(1))
        .await
        .expect("list_namespaces")
        .next_cursor
        .expect("a cursor: a second namespace follows");

    let other_scopes = [
        h.scope("user-2"),
        h.scope_in("user-1", "ns"),
        MemoryScope::new(format!("{}-other", h.app()), "user-1").expect("valid ids"),
    ];
    for other in &other_scopes {
        let what = format!("a list cursor of {scope:?} used in {other:?}");
        expect_invalid(
            store.list(other, PageRequest::new(5).after(list_cursor.clone())).await,
            "cursor",
            &what,
        );
    }
    let p = || PageRequest::new(5).after(list_cursor.clone());
    expect_invalid(
        store.search(&scope, "needle", p()).await,
        "cursor",
        "a list cursor used in search",
    );
    expect_invalid(
        store.purge_expired(&scope, p()).await,
        "cursor",
        "a list cursor used in purge_expired",
    );
    expect_invalid(
        store.list_namespaces(h.app(), "user-1", p()).await,
        "cursor",
        "a list cursor used in list_namespaces",
    );
    expect_invalid(
        store.list(&scope, PageRequest::new(5).after(ns_cursor.clone())).await,
        "cursor",
        "a list_namespaces cursor used in list",
    );
    expect_invalid(
        store.list_namespaces(h.app(), "user-2", PageRequest::new(5).after(ns_cursor)).await,
        "cursor",
        "a list_namespaces cursor used for another user",
    );
}

/// Malformed cursors (garbage tokens, or well-formed ones naming an impossible position) are
/// `Invalid` everywhere: tokens no provider may make already when parsed, printable ones that
/// no provider made when the store gets them.
pub async fn malformed_cursors_are_invalid(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "k", "needle").await;
    for garbage in ["", "not a cursor", "tab\there", &"A".repeat(10_000)] {
        assert!(
            Cursor::parse(garbage).is_err(),
            "Cursor::parse must reject the garbage token {:?}",
            &garbage[..garbage.len().min(20)]
        );
    }
    for garbage in ["!!!!", "AAAA", "x", &"A".repeat(512)] {
        let cursor = Cursor::parse(garbage).expect("a printable token of at most 512 bytes parses");
        expect_refused_everywhere(h.store(), &scope, &cursor, "a garbage token").await;
    }
    let impossible = [
        ("an empty key", String::new()),
        ("a key with a newline", "a\nb".to_owned()),
        ("a key over 256 bytes", "k".repeat(257)),
    ];
    for (what, position) in impossible {
        let store = h.store();
        let for_kind = |kind| key_cursor(kind, &scope, &position);
        expect_invalid(
            store.list(&scope, PageRequest::new(5).after(for_kind(CursorKind::List))).await,
            "cursor",
            &format!("list with a cursor positioned at {what}"),
        );
        expect_invalid(
            store
                .search(&scope, "needle", PageRequest::new(5).after(for_kind(CursorKind::Search)))
                .await,
            "cursor",
            &format!("search with a cursor positioned at {what}"),
        );
        expect_invalid(
            store
                .purge_expired(&scope, PageRequest::new(5).after(for_kind(CursorKind::Purge)))
                .await,
            "cursor",
            &format!("purge_expired with a cursor positioned at {what}"),
        );
    }
    let bad_ns = namespace_cursor(h.app(), "user-1", "a\u{7f}b");
    expect_invalid(
        h.store().list_namespaces(h.app(), "user-1", PageRequest::new(5).after(bad_ns)).await,
        "cursor",
        "list_namespaces with a cursor positioned at a namespace no scope can have",
    );
}

/// A cursor is a position, not a snapshot: later pages show records written ahead of it and
/// drop records deleted ahead of it.
pub async fn cursors_are_positions_not_snapshots(h: Harness) {
    let scope = h.scope("user-1");
    for key in ["b", "c", "d", "e"] {
        put(h.store(), &scope, key, "x").await;
    }
    let first = h.store().list(&scope, PageRequest::new(2)).await.expect("list");
    assert_eq!(keys(&first.items), ["b", "c"], "the first page");
    let cursor = first.next_cursor.expect("more records follow");
    put(h.store(), &scope, "a", "behind the cursor").await;
    assert!(h.store().delete(&scope, "d", None).await.expect("delete"), "delete d");
    put(h.store(), &scope, "f", "ahead of the cursor").await;
    let rest = list_request_all(h.store(), &scope, PageRequest::new(2).after(cursor)).await;
    assert_eq!(
        keys(&rest),
        ["e", "f"],
        "continuing a list must skip records written behind the cursor and records deleted \
         ahead of it, and must show records written ahead of it"
    );
}

/// A page of a named namespace or of one user never includes records of its neighbours, even
/// when the neighbours' keys sort in between.
pub async fn pages_stay_inside_their_scope(h: Harness) {
    let scope = h.scope_in("user-1", "ns");
    let neighbours = [
        h.scope("user-1"),
        h.scope_in("user-1", "ns2"),
        h.scope("user-10"),
        h.scope_in("user-1", "n"),
    ];
    for i in 0..10 {
        let key = format!("k{i:02}");
        if i % 2 == 0 {
            put(h.store(), &scope, &key, "mine").await;
        } else {
            for other in &neighbours {
                put(h.store(), other, &key, "neighbour").await;
            }
        }
    }
    for limit in [1, 3, 100] {
        let listed = list_all(h.store(), &scope, limit).await;
        assert_eq!(
            keys(&listed),
            ["k00", "k02", "k04", "k06", "k08"],
            "list with limit {limit} must page only the scope's own keys"
        );
        assert!(listed.iter().all(|r| r.scope == scope), "every record carries the listed scope");
    }
}
