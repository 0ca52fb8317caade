//! Helpers shared by the cases: draining paged operations, checking error shapes, and the
//! compare-and-set increment (public, for providers' own race tests).
//!
//! Nothing here is a case; `cases` re-exports only the case files.

use std::collections::HashSet;
use std::fmt::Debug;

use crate::conformance::Harness;
use crate::error::{MemoryError, Result};
use crate::page::{ApplicationPage, Cursor, MemoryPage, PageRequest};
use crate::provider::application_cursor;
use crate::record::{MemoryRecord, Revision, Source};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

/// More pages than any case needs: a provider that keeps returning cursors past this is looping.
pub(crate) const MAX_PAGES: usize = 2_000;

/// Text full of separators, wildcards, escapes, quotes, white space, dots and non-ASCII, some
/// of it matching other entries when read as a pattern (`a%b` and `a_b` match `axb`): each is
/// valid both as a key and as an id (no control characters, at most 128 bytes), and the cases
/// use them as keys, user ids and namespaces that must stay apart.
pub(crate) const AWKWARD_TEXT: &[&str] = &[
    "a:b",
    "a",
    "b",
    "a/b",
    "{a}",
    "{a}:b",
    "a%",
    "a_",
    "a*",
    "a?",
    "[a]",
    "a\\",
    "a\\:b",
    "'a'",
    "\"a\"",
    "a b",
    "é",
    "e\u{301}",
    "中文",
    "😀",
    "a%b",
    "a_b",
    "axb",
    "%",
    "_",
    "*",
    "\\",
    "::",
    "a::b",
    "{tag}",
    "?",
    "[x]",
    "'",
    "\"",
    " ",
    "..",
    "-",
    "~",
    "key\u{200b}",
];

/// Every live record of `scope`, following `list` cursors until `next_cursor` is `None`.
///
/// Checks on the way that no page exceeds `limit`.
pub(crate) async fn list_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    limit: usize,
) -> Vec<MemoryRecord> {
    list_request_all(store, scope, PageRequest::new(limit)).await
}

/// Every live record of `scope` whose content contains `query`, following `search` cursors
/// until `next_cursor` is `None` (empty pages with a cursor are allowed and followed).
pub(crate) async fn search_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    query: &str,
    limit: usize,
) -> Vec<MemoryRecord> {
    search_request_all(store, scope, query, PageRequest::new(limit)).await
}

/// Every live record of `scope` that `search` matches with the options of `request` (its
/// mode, case and metadata filter), following cursors from `request`'s limit.
pub(crate) async fn search_request_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    query: &str,
    request: PageRequest,
) -> Vec<MemoryRecord> {
    let what = format!("search({query:?})");
    drain_from(&what, request, |page| store.search(scope, query, page)).await
}

/// The records every search-matching case searches, as `(key, content)`: ASCII words in
/// several letter cases and orders, words run together, pattern characters, decomposed and
/// precomposed accents, CJK and emoji, control white space, and the letters whose simple case
/// folding is special (the Kelvin sign, sharp s and capital sharp s, final sigma, dotted
/// capital I, long s). A case's expected keys are worked out against all of them.
pub(crate) const SEARCH_CORPUS: &[(&str, &str)] = &[
    ("a-both", "prefers the berlin warehouse"),
    ("ascii", "Prefers the Berlin WAREHOUSE"),
    ("b-reversed", "warehouse: berlin"),
    ("c-one", "berlin only"),
    ("capital-sharp-s", "STRA\u{1E9E}E"),
    ("cjk", "中文😀文字"),
    ("coffee", "drinks coffee black"),
    ("composed", "caf\u{e9} au lait"),
    ("cyrillic", "ПРИВЕТ мир"),
    ("d-joined", "berlinwarehouse"),
    ("decomposed", "cafe\u{301} noir"),
    ("dotted-i", "İstanbul"),
    ("e-none", "munich depot"),
    ("final-sigma", "σοφος"),
    ("kelvin", "300 \u{212A}ELVIN"),
    ("long-s", "\u{17F}tar"),
    ("lower", "hello world"),
    ("newline", "line one\r\nline two\ttab"),
    ("percent", "50% off_today"),
    ("plain", "50 percent off today"),
    ("sharp-s", "straße"),
    ("sigma", "ΣΟΦΟΣ"),
    ("stems", "reports in metric units"),
    ("tea", "green tea in the afternoon"),
    ("title", "Hello World"),
    ("title-sharp-s", "Straße"),
    ("upper", "HELLO WORLD"),
    ("water", "only water"),
];

/// Writes [`SEARCH_CORPUS`] into `h`'s scope for `user-1`, panicking on an error, and returns
/// the scope.
pub(crate) async fn search_corpus(h: &Harness) -> MemoryScope {
    let scope = h.scope("user-1");
    for (key, content) in SEARCH_CORPUS {
        put(h.store(), &scope, key, content).await;
    }
    scope
}

/// Queries paired with the keys a search must find for each, in key order.
pub(crate) type SearchCases<'a> = &'a [(&'a str, &'a [&'a str])];

/// Panics unless `search` with the options of `request` (its mode, case and metadata filter)
/// finds, for each query of `cases`, exactly the keys listed with it; `rule` says in failures
/// what kind of match the search must be.
pub(crate) async fn expect_found(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    request: &PageRequest,
    cases: SearchCases<'_>,
    rule: &str,
) {
    for (query, expected) in cases {
        let found = search_request_all(store, scope, query, request.clone()).await;
        assert_eq!(
            keys(&found),
            *expected,
            "search({query:?}) with {:?}, {:?}: {rule}",
            request.matching,
            request.case
        );
    }
}

/// Every live record of `scope` that `list` returns for `request` (its prefix and metadata
/// filter), following cursors from `request`'s limit.
pub(crate) async fn list_request_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    request: PageRequest,
) -> Vec<MemoryRecord> {
    drain_from("list", request, |page| store.list(scope, page)).await
}

/// Follows the `list` or `search` cursors of one paged read (`what` and the request name it in
/// failures) from the first page of `request`, every later page carrying its options, until
/// `next_cursor` is `None`.
async fn drain_from<F, Fut>(what: &str, request: PageRequest, mut fetch: F) -> Vec<MemoryRecord>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: std::future::Future<Output = Result<MemoryPage>>,
{
    drain_items(what, request, |page| {
        let result = fetch(page);
        async move { result.await.map(|page| (page.items, page.next_cursor)) }
    })
    .await
}

/// Follows the cursors of one paged read (`what` and the first request name it in failures)
/// from `request` until `next_cursor` is `None`, checking that no page holds more than the
/// request's limit; `fetch` gives a page's items and its next cursor.
pub(crate) async fn drain_items<T, F, Fut>(what: &str, request: PageRequest, mut fetch: F) -> Vec<T>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<Cursor>)>>,
{
    let limit = request.limit;
    let what = format!("{what} from {request:?}");
    let mut all = Vec::new();
    let mut page = request;
    for _ in 0..MAX_PAGES {
        let (items, next_cursor) =
            fetch(page.clone()).await.unwrap_or_else(|e| panic!("{what} failed: {e:?}"));
        assert!(items.len() <= limit, "{what} returned {} items for limit {limit}", items.len());
        all.extend(items);
        match next_cursor {
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
    let scopes = drain_items("list_namespaces", PageRequest::new(limit), |page| {
        let result = store.list_namespaces(application_id, user_id, page);
        async move { result.await.map(|page| (page.items, page.next_cursor)) }
    })
    .await;
    let mut all = Vec::new();
    for scope in scopes {
        assert_eq!(
            (scope.application_id(), scope.user_id()),
            (application_id, user_id),
            "list_namespaces returned a scope of another application user"
        );
        all.push(scope.namespace().map(str::to_owned));
    }
    all
}

/// Every user id of one application, following `list_users` cursors (through short or empty
/// pages) until `next_cursor` is `None`.
pub(crate) async fn users_all(
    store: &dyn MemoryStore,
    application_id: &str,
    limit: usize,
) -> Vec<String> {
    drain_items("list_users", PageRequest::new(limit), |page| {
        let result = store.list_users(application_id, page);
        async move { result.await.map(|page| (page.items, page.next_cursor)) }
    })
    .await
}

/// The applications whose ids extend `own` (a case's [`Harness::app`]), following
/// `list_applications` cursors from [`applications_after`] (through short or empty pages)
/// until an id past them or the end. Cases share the datastore, so this never reads the whole
/// listing for its answer when it can start at `own`: ids that start with `own` sit together
/// in byte order, right after it.
///
/// [`Harness::app`]: crate::conformance::Harness::app
pub(crate) async fn applications_within(
    store: &dyn MemoryStore,
    own: &str,
    limit: usize,
) -> Vec<String> {
    let mut all = Vec::new();
    let mut page = applications_after(store, own, limit).await;
    let positioned = page.after == Some(application_cursor(own));
    for _ in 0..MAX_PAGES {
        let result = list_applications(store, &page).await;
        for id in result.items {
            if id.as_str() <= own {
                assert!(
                    !positioned,
                    "list_applications returned {id:?}, which is not after its cursor's position"
                );
                continue;
            }
            if !id.starts_with(own) {
                return all;
            }
            all.push(id);
        }
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => return all,
        }
    }
    panic!(
        "list_applications still returned a cursor after {MAX_PAGES} pages: cursors must advance"
    )
}

/// A `list_applications` request of `limit` whose page holds the first ids after `own`.
///
/// For a store on the core's cursors (its first page's cursor says so), a cursor positioned
/// at `own`: one call, however long the shared listing. A store with cursors of its own
/// cannot be handed a position, so its listing is read from the start, and the request is
/// the first one whose page holds an id after `own` (that page may also hold ids before it).
pub(crate) async fn applications_after(
    store: &dyn MemoryStore,
    own: &str,
    limit: usize,
) -> PageRequest {
    let mut page = PageRequest::new(limit);
    for _ in 0..MAX_PAGES {
        let result = list_applications(store, &page).await;
        if result.next_cursor.as_ref().is_some_and(Cursor::is_core_format) {
            return PageRequest::new(limit).after(application_cursor(own));
        }
        if result.items.iter().any(|id| id.as_str() > own) {
            return page;
        }
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => return page,
        }
    }
    panic!(
        "list_applications still returned a cursor after {MAX_PAGES} pages: cursors must advance"
    )
}

async fn list_applications(store: &dyn MemoryStore, page: &PageRequest) -> ApplicationPage {
    let limit = page.limit;
    let result = store
        .list_applications(page.clone())
        .await
        .unwrap_or_else(|e| panic!("list_applications(limit {limit}) failed: {e:?}"));
    assert!(
        result.items.len() <= limit,
        "list_applications returned {} applications for limit {limit}",
        result.items.len()
    );
    result
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

/// Panics unless every paged operation of `scope`'s user (`list`, `search`, `purge_expired`,
/// `list_namespaces`, `list_users`, `list_applications`) refuses `cursor` as `Invalid`
/// naming `cursor`.
pub(crate) async fn expect_refused_everywhere(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    cursor: &Cursor,
    what: &str,
) {
    let page = || PageRequest::new(5).after(cursor.clone());
    let (app, user) = (scope.application_id(), scope.user_id());
    expect_invalid(store.list(scope, page()).await, "cursor", &format!("list with {what}"));
    expect_invalid(
        store.search(scope, "needle", page()).await,
        "cursor",
        &format!("search with {what}"),
    );
    expect_invalid(
        store.purge_expired(scope, page()).await,
        "cursor",
        &format!("purge_expired with {what}"),
    );
    expect_invalid(
        store.list_namespaces(app, user, page()).await,
        "cursor",
        &format!("list_namespaces with {what}"),
    );
    expect_invalid(
        store.list_users(app, page()).await,
        "cursor",
        &format!("list_users with {what}"),
    );
    expect_invalid(
        store.list_applications(page()).await,
        "cursor",
        &format!("list_applications with {what}"),
    );
}

/// Ids of an application user that every call taking them must refuse as `Invalid` naming
/// the id at fault, as `(application id, user id, field, what)`: empty ids, a newline, a tab,
/// NUL and 129 bytes; `app` is the valid application id beside a bad user id.
pub(crate) fn invalid_user_ids(app: &str) -> [(&str, String, &'static str, &'static str); 6] {
    [
        (app, String::new(), "user_id", "an empty user id"),
        ("", "user-1".to_owned(), "application_id", "an empty application id"),
        (app, "a\nb".to_owned(), "user_id", "a user id with a newline"),
        (app, "a\tb".to_owned(), "user_id", "a user id with a tab"),
        (app, "a\0b".to_owned(), "user_id", "a user id with NUL"),
        (app, "u".repeat(129), "user_id", "a 129-byte user id"),
    ]
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

/// Writes `content` at `key` expiring at [`Harness::soon`], panicking on an error.
pub(crate) async fn put_expiring(
    h: &Harness,
    scope: &MemoryScope,
    key: &str,
    content: &str,
) -> MemoryRecord {
    put_write(h.store(), scope, key, MemoryWrite::new(content).expires_at(h.soon())).await
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
    put_write(store, scope, key, MemoryWrite::new(content)).await
}

/// Writes `write` at `key`, panicking on an error.
pub(crate) async fn put_write(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    key: &str,
    write: MemoryWrite,
) -> MemoryRecord {
    store.put(scope, key, write).await.unwrap_or_else(|e| panic!("put({key:?}) failed: {e:?}"))
}

/// Writes "kept" at `key` with metadata and a source, so that a later comparison covers every
/// field a write sets; panics on an error.
pub(crate) async fn put_every_field(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    key: &str,
) -> MemoryRecord {
    let write = MemoryWrite::new("kept")
        .metadata(serde_json::json!({"a": 1}))
        .source(Source::default().agent("a"));
    put_write(store, scope, key, write).await
}

/// More conflicts in a row than any race produces: past this, a live revision never matched.
const MAX_INCREMENT_ATTEMPTS: usize = 10_000;

/// One compare-and-set increment won by [`increment_counter`].
#[derive(Debug, Clone)]
pub struct Increment {
    /// The record the winning write returned.
    pub record: MemoryRecord,
    /// The counter's value after this increment.
    pub value: usize,
    /// How many `Conflict`s were retried before the write won.
    pub conflicts: usize,
    /// True when the key held no live record, so this increment created it with `1`.
    pub created: bool,
}

/// Adds one to the decimal counter at `key` with the optimistic loop: read the record, write
/// the next value with the revision read (`create_only` with `1` when there is none), and on
/// `Conflict` start again. Racing callers therefore never lose an increment, on any provider
/// whose conditional writes are atomic.
///
/// # Errors
/// Any error of `get` or `put` other than `Conflict`, as the store returned it.
///
/// # Panics
/// When the record does not hold a decimal number, or no write wins in 10,000 attempts (a
/// live revision never matched).
pub async fn increment_counter(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    key: &str,
) -> Result<Increment> {
    for conflicts in 0..MAX_INCREMENT_ATTEMPTS {
        let current = store.get(scope, key).await?;
        let created = current.is_none();
        let (value, write) = match current {
            Some(current) => {
                let value: usize = current.content.parse().unwrap_or_else(|_| {
                    panic!("the counter {key:?} holds {:?}, not a number", current.content)
                });
                let next = value + 1;
                (next, MemoryWrite::new(next.to_string()).expected_revision(current.revision))
            }
            None => (1, MemoryWrite::new("1").create_only()),
        };
        match store.put(scope, key, write).await {
            Ok(record) => return Ok(Increment { record, value, conflicts, created }),
            Err(MemoryError::Conflict { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    panic!(
        "a compare-and-set increment of {key:?} never succeeded in {MAX_INCREMENT_ATTEMPTS} \
         attempts: a live revision never matched"
    )
}

/// [`increment_counter`] of a counter the case wrote first, panicking on any error.
pub(crate) async fn increment_existing(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    key: &str,
) -> Increment {
    let won = increment_counter(store, scope, key)
        .await
        .unwrap_or_else(|other| panic!("a compare-and-set increment failed with {other:?}"));
    assert!(!won.created, "the counter exists");
    won
}
