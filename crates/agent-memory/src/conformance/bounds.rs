//! Scan and batch bounds a provider takes as options ([`Fixture::with_bounds`]): with tiny
//! ones, each `search` or filtered `list` call stops within them and hands back a cursor,
//! resuming finds every match once, and erasures go batch by batch until nothing is left.
//!
//! A fixture without bounds has nothing to check here, and these cases end at once.
//!
//! [`Fixture::with_bounds`]: crate::conformance::Fixture::with_bounds

use std::future::Future;
use std::sync::Arc;

use serde_json::json;

use super::support::{keys, list_all, namespaces_all, put, MAX_PAGES};
use crate::conformance::{Bounds, Harness};
use crate::error::Result;
use crate::matching::MetadataFilter;
use crate::page::{MemoryPage, PageRequest};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

/// Runs `case` with the harness, the store with `bounds` (see [`Harness::with_bounds`]) and
/// `user-1`'s default namespace, then closes the store; does nothing when the fixture takes no
/// bounds.
async fn with_bounds<F, Fut>(h: Harness, bounds: Bounds, case: F)
where
    F: FnOnce(Harness, Arc<dyn MemoryStore>, MemoryScope) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(store) = h.with_bounds(bounds).await else {
        return;
    };
    let scope = h.scope("user-1");
    case(h, Arc::clone(&store), scope).await;
    store.close().await.expect("close");
}

/// The keys each call of one paged read returned, following its cursors from `request`.
async fn calls<F, Fut>(request: PageRequest, mut read: F) -> Vec<Vec<String>>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: Future<Output = Result<MemoryPage>>,
{
    let mut calls = Vec::new();
    let mut page = request;
    for _ in 0..MAX_PAGES {
        let result = read(page.clone()).await.unwrap_or_else(|e| panic!("a paged read: {e:?}"));
        calls.push(result.items.into_iter().map(|r| r.key).collect());
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => return calls,
        }
    }
    panic!("a paged read still returned a cursor after {MAX_PAGES} calls: cursors must advance")
}

/// A user, the query searched in their records, and the content of record `n`.
type Dataset<'a> = (&'static str, &'a str, fn(usize) -> String);

/// The keys `search` finds for `query` with `request`'s options, call by call.
async fn search_calls(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    query: &str,
    request: PageRequest,
) -> Vec<Vec<String>> {
    calls(request, |page| store.search(scope, query, page)).await
}

/// With `search_scan_limit` 5, one `search` call inspects five keys: a match past them needs a
/// cursor and resuming finds it once, pattern characters stay literal, and a `list` without a
/// filter still fills its page.
pub async fn search_scan_limit_bounds_the_keys_of_each_call(h: Harness) {
    let bounds = Bounds { search_scan_limit: Some(5), ..Bounds::default() };
    with_bounds(h, bounds, |h, store, scope| async move {
        for i in 0..12 {
            put(store.as_ref(), &scope, &format!("a{i:02}"), "nothing here").await;
        }
        put(store.as_ref(), &scope, "z", "100% literal_match").await;
        let first =
            store.search(&scope, "literal_match", PageRequest::new(10)).await.expect("search");
        assert!(first.items.is_empty(), "the first five keys do not match");
        assert!(first.next_cursor.is_some(), "a call that spent its scan limit returns a cursor");
        let found =
            search_calls(store.as_ref(), &scope, "literal_match", PageRequest::new(10)).await;
        assert_eq!(found.concat(), ["z"]);
        assert_eq!(found.len(), 3, "13 keys at 5 per call");
        // Wildcards are literal.
        let found = search_calls(store.as_ref(), &scope, "0%", PageRequest::new(10)).await;
        assert_eq!(found.concat(), ["z"]);
        let found = search_calls(store.as_ref(), &scope, "g_h", PageRequest::new(10)).await;
        assert!(found.concat().is_empty());
        // Without a filter, list keeps its own budget and fills its page.
        let all = store.list(&scope, PageRequest::new(100)).await.expect("list");
        assert_eq!((all.items.len(), all.next_cursor.is_none()), (13, true));

        let mixed = h.scope("user-2");
        for n in 0..10 {
            let content = if n % 2 == 0 { "hit" } else { "miss" };
            put(store.as_ref(), &mixed, &format!("key-{n:02}"), content).await;
        }
        let found = search_calls(store.as_ref(), &mixed, "hit", PageRequest::new(10)).await;
        assert_eq!(found[0], ["key-00", "key-02", "key-04"], "the first call inspects five keys");
        assert_eq!(found.concat(), ["key-00", "key-02", "key-04", "key-06", "key-08"]);
    })
    .await;
}

/// With `search_scan_bytes` 250, one `search` call reads about 250 bytes of content: with
/// records of 100 bytes, three records a call (the third crosses the budget), whether or not
/// the candidates hold the start of the query.
pub async fn search_scan_bytes_bounds_the_content_of_each_call(h: Harness) {
    let bounds = Bounds { search_scan_bytes: Some(250), ..Bounds::default() };
    with_bounds(h, bounds, |h, store, _| async move {
        // The first user's records all hold the query's first 16 bytes, and only key-07 all of
        // it; the second user's hold nothing of their query but key-07's.
        let prefixed = format!("{}needle", "y".repeat(20));
        let datasets: [Dataset<'_>; 2] = [
            ("user-1", &prefixed, |n| {
                let tail =
                    if n == 7 { format!("needle{}", "x".repeat(74)) } else { "x".repeat(80) };
                format!("{}{tail}", "y".repeat(20))
            }),
            ("user-2", "needle", |n| {
                if n == 7 {
                    format!("{}needle", "x".repeat(94))
                } else {
                    "x".repeat(100)
                }
            }),
        ];
        for (user, query, content) in datasets {
            let scope = h.scope(user);
            for n in 0..10 {
                put(store.as_ref(), &scope, &format!("key-{n:02}"), &content(n)).await;
            }
            let found = search_calls(store.as_ref(), &scope, query, PageRequest::new(10)).await;
            assert_eq!(
                found.len(),
                4,
                "{user}: ten records of 100 bytes at three a call: {found:?}"
            );
            assert_eq!(
                found.concat(),
                ["key-07"],
                "{user}: candidates without the query are dropped"
            );
            assert_eq!(found[2], ["key-07"], "{user}: the third call inspects keys 06 to 08");
            let paged = store.search(&scope, query, PageRequest::new(1)).await.expect("search");
            assert!(paged.items.is_empty() && paged.next_cursor.is_some(), "{user}: a page of one");
        }
    })
    .await;
}

/// With `search_scan_limit` 4, a `list` with a metadata filter is a bounded scan within its
/// prefix: a match past the first four keys needs a cursor, and the scan ends with the prefix.
pub async fn a_filtered_list_is_a_bounded_scan_within_its_prefix(h: Harness) {
    let bounds = Bounds { search_scan_limit: Some(4), ..Bounds::default() };
    with_bounds(h, bounds, |_, store, scope| async move {
        for i in 0..20 {
            let write = MemoryWrite::new("x").metadata(json!({"pinned": i % 7 == 5}));
            store.put(&scope, &format!("n/{i:02}"), write).await.expect("put");
        }
        let pinned = MemoryWrite::new("x").metadata(json!({"pinned": true}));
        store.put(&scope, "z", pinned).await.expect("put");
        let filter = MetadataFilter::new().field("pinned", true);
        let request = PageRequest::new(10).prefix("n/").metadata(filter);
        let first = store.list(&scope, request.clone()).await.expect("list");
        assert!(first.items.is_empty(), "n/00..n/03 hold no pinned record");
        assert!(first.next_cursor.is_some(), "an exhausted bound returns a cursor");
        let found = calls(request, |page| store.list(&scope, page)).await;
        assert_eq!(found.concat(), ["n/05", "n/12", "n/19"]);
        assert_eq!(found.len(), 6, "20 keys at 4 per call, then the end of the prefix");
        // Without a filter, list keeps its own budget and fills its page.
        let all = store.list(&scope, PageRequest::new(100)).await.expect("list");
        assert_eq!((all.items.len(), all.next_cursor.is_none()), (21, true));
    })
    .await;
}

/// With `erase_batch_size` 3, `delete_all` and `delete_user` go batch by batch until nothing is
/// left, counting every record, also when the count is a multiple of the batch size.
pub async fn erasure_in_small_batches_removes_everything(h: Harness) {
    let bounds = Bounds { erase_batch_size: Some(3), ..Bounds::default() };
    with_bounds(h, bounds, |h, store, scope| async move {
        for n in 0..10 {
            put(store.as_ref(), &scope, &format!("key-{n:02}"), "v").await;
        }
        assert_eq!(store.delete_all(&scope).await.expect("delete_all"), 10);
        assert!(list_all(store.as_ref(), &scope, 100).await.is_empty());
        let notes = h.scope_in("user-1", "notes");
        for (n, target) in [&scope, &notes, &notes].into_iter().cycle().take(9).enumerate() {
            put(store.as_ref(), target, &format!("key-{n}"), "v").await;
        }
        assert_eq!(store.delete_user(h.app(), "user-1").await.expect("delete_user"), 9);
        assert!(namespaces_all(store.as_ref(), h.app(), "user-1", 10).await.is_empty());
        assert!(keys(&list_all(store.as_ref(), &notes, 100).await).is_empty());
    })
    .await;
}
