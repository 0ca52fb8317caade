//! Helpers shared by the cases: draining paged operations and checking error shapes.
//!
//! Nothing here is a case; `cases` re-exports only the case files.

use std::collections::HashSet;
use std::fmt::Debug;

use crate::error::{MemoryError, Result};
use crate::page::{MemoryPage, PageRequest};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;

/// More pages than any case needs: a provider that keeps returning cursors past this is looping.
const MAX_PAGES: usize = 2_000;

/// Every live record of `scope`, following `list` cursors until `next_cursor` is `None`.
///
/// Checks on the way that no page exceeds `limit`.
pub(crate) async fn list_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    limit: usize,
) -> Vec<MemoryRecord> {
    let what = format!("list(limit {limit})");
    drain(&what, limit, |page| store.list(scope, page)).await
}

/// Every live record of `scope` whose content contains `query`, following `search` cursors
/// until `next_cursor` is `None` (empty pages with a cursor are allowed and followed).
pub(crate) async fn search_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    query: &str,
    limit: usize,
) -> Vec<MemoryRecord> {
    let what = format!("search({query:?}, limit {limit})");
    drain(&what, limit, |page| store.search(scope, query, page)).await
}

/// Follows the cursors of one paged read (`what` names it in failures) until `next_cursor` is
/// `None`, checking that no page exceeds `limit`.
async fn drain<F, Fut>(what: &str, limit: usize, mut fetch: F) -> Vec<MemoryRecord>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: std::future::Future<Output = Result<MemoryPage>>,
{
    let mut all = Vec::new();
    let mut page = PageRequest::new(limit);
    for _ in 0..MAX_PAGES {
        let result = fetch(page.clone()).await.unwrap_or_else(|e| panic!("{what} failed: {e:?}"));
        assert!(
            result.items.len() <= limit,
            "{what} returned {} records for limit {limit}",
            result.items.len()
        );
        all.extend(result.items);
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => return all,
        }
    }
    panic!("{what} still returned a cursor after {MAX_PAGES} pages: cursors must advance")
}

/// Every namespace of one application user, as `None` (default) or `Some(name)`, following
/// `list_namespaces` cursors.
pub(crate) async fn namespaces_all(
    store: &dyn MemoryStore,
    application_id: &str,
    user_id: &str,
    limit: usize,
) -> Vec<Option<String>> {
    let mut all = Vec::new();
    let mut page = PageRequest::new(limit);
    for _ in 0..MAX_PAGES {
        let result = store
            .list_namespaces(application_id, user_id, page.clone())
            .await
            .unwrap_or_else(|e| panic!("list_namespaces(limit {limit}) failed: {e:?}"));
        assert!(
            result.items.len() <= limit,
            "list_namespaces returned {} namespaces for limit {limit}",
            result.items.len()
        );
        for scope in result.items {
            assert_eq!(
                (scope.application_id(), scope.user_id()),
                (application_id, user_id),
                "list_namespaces returned a scope of another application user"
            );
            all.push(scope.namespace().map(str::to_owned));
        }
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => return all,
        }
    }
    panic!("list_namespaces still returned a cursor after {MAX_PAGES} pages: cursors must advance")
}

/// Sweeps `scope` with `purge_expired` until no cursor is left; returns the total deleted and
/// the number of calls.
pub(crate) async fn purge_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    limit: usize,
) -> (u64, usize) {
    let mut total = 0;
    let mut page = PageRequest::new(limit);
    for calls in 1..=MAX_PAGES {
        let result = store
            .purge_expired(scope, page.clone())
            .await
            .unwrap_or_else(|e| panic!("purge_expired(limit {limit}) failed: {e:?}"));
        assert!(
            result.deleted <= limit as u64,
            "purge_expired deleted {} records but may inspect at most limit {limit} keys",
            result.deleted
        );
        total += result.deleted;
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => return (total, calls),
        }
    }
    panic!("purge_expired still returned a cursor after {MAX_PAGES} calls: cursors must advance")
}

/// The keys of `records`, in order.
pub(crate) fn keys(records: &[MemoryRecord]) -> Vec<&str> {
    records.iter().map(|r| r.key.as_str()).collect()
}

/// `keys` sorted by UTF-8 bytes, which is how Rust orders `str`.
pub(crate) fn byte_sorted<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut sorted: Vec<&str> = keys.into_iter().collect();
    sorted.sort_unstable();
    sorted
}

/// Panics unless `result` is `Invalid` naming `field`.
pub(crate) fn expect_invalid<T: Debug>(result: Result<T>, field: &str, what: &str) {
    match result {
        Err(MemoryError::Invalid { field: found, .. }) => assert_eq!(
            found, field,
            "{what}: Invalid must name the field `{field}`, it named `{found}`"
        ),
        other => panic!("{what}: expected Invalid naming `{field}`, got {other:?}"),
    }
}

/// Panics unless `result` is `Conflict`.
pub(crate) fn expect_conflict<T: Debug>(result: Result<T>, what: &str) {
    match result {
        Err(MemoryError::Conflict { .. }) => {}
        other => panic!("{what}: expected Conflict, got {other:?}"),
    }
}

/// Panics unless every revision in `revisions` is different.
pub(crate) fn assert_distinct(revisions: &[Revision], what: &str) {
    let unique: HashSet<&Revision> = revisions.iter().collect();
    assert_eq!(
        unique.len(),
        revisions.len(),
        "{what}: a revision was issued twice for the same key: {revisions:?}"
    );
}

/// Reads `key`, panicking on an error.
pub(crate) async fn get(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    key: &str,
) -> Option<MemoryRecord> {
    store.get(scope, key).await.unwrap_or_else(|e| panic!("get({key:?}) failed: {e:?}"))
}

/// Writes `content` at `key` unconditionally, panicking on an error.
pub(crate) async fn put(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    key: &str,
    content: &str,
) -> MemoryRecord {
    store
        .put(scope, key, crate::write::MemoryWrite::new(content))
        .await
        .unwrap_or_else(|e| panic!("put({key:?}) failed: {e:?}"))
}
