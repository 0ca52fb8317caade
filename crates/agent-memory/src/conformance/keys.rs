//! `list_keys`: the keys `list` returns, each with its content's size in bytes, paged with
//! cursors of its own.

use super::support::{byte_sorted, drain_items, expect_invalid, put, put_expiring};
use crate::conformance::Harness;
use crate::page::{KeyInfo, PageRequest};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::validation::MAX_CONTENT_BYTES;

/// Every key of `scope` that `list_keys` returns for `request` (its prefix), with its size,
/// following cursors (each request carrying the prefix) until `next_cursor` is `None`.
async fn list_keys_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    request: PageRequest,
) -> Vec<KeyInfo> {
    drain_items("list_keys", request, |page| {
        let result = store.list_keys(scope, page);
        async move { result.await.map(|page| (page.items, page.next_cursor)) }
    })
    .await
}

/// `list_keys` returns exactly the keys `list` does (every key, and under each prefix, at
/// every page size), in byte order, each with its content's length in UTF-8 bytes: ASCII,
/// multi-byte text, empty content and the largest content allowed.
pub async fn list_keys_returns_the_keys_of_list_with_content_sizes(h: Harness) {
    let scope = h.scope("user-1");
    let largest = "x".repeat(MAX_CONTENT_BYTES);
    let written: [(&str, &str); 8] = [
        ("notes/a.md", "plain"),
        ("notes/é.md", "é😀 – ünïcödé"),
        ("notes/empty", ""),
        ("notes/sub/deep.md", "below"),
        ("notes0", "after the prefix"),
        ("big", &largest),
        ("a", "first"),
        ("Notes/x", "upper case"),
    ];
    for (key, content) in written.iter().rev() {
        put(h.store(), &scope, key, content).await;
    }
    put(h.store(), &h.scope("user-2"), "notes/other-user", "x").await;
    put(h.store(), &h.scope_in("user-1", "ns"), "notes/other-namespace", "x").await;
    for prefix in ["", "notes/", "notes/s", "n", "zz"] {
        let expected: Vec<KeyInfo> =
            byte_sorted(written.iter().map(|(key, _)| *key).filter(|key| key.starts_with(prefix)))
                .into_iter()
                .map(|key| {
                    let content = written.iter().find(|(k, _)| *k == key).expect("written").1;
                    KeyInfo::new(key, u64::try_from(content.len()).expect("small"))
                })
                .collect();
        for limit in [1, 2, 3, 100] {
            let listed =
                list_keys_all(h.store(), &scope, PageRequest::new(limit).prefix(prefix)).await;
            assert_eq!(
                listed, expected,
                "list_keys with prefix {prefix:?} and limit {limit} must return each key of \
                 the scope under the prefix once, in byte order, with its content's size"
            );
        }
    }
}

/// `list_keys` leaves out expired records, as `list` does.
pub async fn list_keys_skips_expired_records(h: Harness) {
    let scope = h.scope("user-1");
    put(h.store(), &scope, "k/live", "live").await;
    put_expiring(&h, &scope, "k/expiring", "soon gone").await;
    let before = list_keys_all(h.store(), &scope, PageRequest::new(1).prefix("k/")).await;
    assert_eq!(before, [KeyInfo::new("k/expiring", 9), KeyInfo::new("k/live", 4)]);
    h.wait_for_expiry().await;
    let after = list_keys_all(h.store(), &scope, PageRequest::new(1).prefix("k/")).await;
    assert_eq!(after, [KeyInfo::new("k/live", 4)], "an expired record is not listed");
}

/// `list_keys` checks its limit and prefix like `list`, and its cursors are its own: bound to
/// the scope and the prefix, refused by `list`, and `list`'s cursors refused by it.
pub async fn list_keys_validates_input_and_keeps_its_own_cursors(h: Harness) {
    let scope = h.scope("user-1");
    for key in ["p/1", "p/2", "p/3"] {
        put(h.store(), &scope, key, "x").await;
    }
    let store = h.store();
    for limit in [0, 101] {
        expect_invalid(store.list_keys(&scope, PageRequest::new(limit)).await, "limit", "limit");
    }
    expect_invalid(
        store.list_keys(&scope, PageRequest::new(5).prefix("a\nb")).await,
        "prefix",
        "a prefix with a newline",
    );
    let first = store.list_keys(&scope, PageRequest::new(1).prefix("p/")).await;
    let cursor = first.expect("list_keys").next_cursor.expect("more keys follow");
    let listed = store.list(&scope, PageRequest::new(1).prefix("p/")).await;
    let list_cursor = listed.expect("list").next_cursor.expect("more records follow");
    let page = |cursor| PageRequest::new(1).prefix("p/").after(cursor);
    expect_invalid(store.list(&scope, page(cursor.clone())).await, "cursor", "in list");
    expect_invalid(store.list_keys(&scope, page(list_cursor)).await, "cursor", "a list cursor");
    expect_invalid(
        store.list_keys(&h.scope("user-2"), page(cursor.clone())).await,
        "cursor",
        "another user's cursor",
    );
    expect_invalid(
        store.list_keys(&scope, PageRequest::new(1).after(cursor.clone())).await,
        "cursor",
        "a prefixed cursor without its prefix",
    );
    let next = store.list_keys(&scope, page(cursor)).await.expect("the next page");
    assert_eq!(next.items, [KeyInfo::new("p/2", 1)]);
}
