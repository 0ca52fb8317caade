//! Building blocks for writing a provider: what every provider in this crate uses, public so a
//! provider outside it uses exactly the same.
//!
//! A provider implements [`MemoryStore`](crate::MemoryStore) and, in each method, first checks
//! its input with the shared rules, then runs one atomic operation in its datastore, then
//! builds the reply with the helpers here:
//!
//! | step | use |
//! | --- | --- |
//! | read a store URL (`from_url`) | [`ConnectionUrl::parse`], then [`Params`]' `take_*` for each parameter the provider knows and [`Params::finish`], which refuses the rest |
//! | take the options every provider takes | a [`CommonOptions`] in the provider's options: search budgets, erase batch size and quotas, with their URL parameters ([`CommonOptions::take_params`]) and checks ([`CommonOptions::check`]) |
//! | check a `put` | [`MemoryWrite::validate`](crate::MemoryWrite::validate), then [`WriteParts::from`] for the [`WriteParts`] and their [`WriteCondition`] |
//! | check a key, a query, ids | [`validation::key`](crate::validation::key), [`validation::query`](crate::validation::query), [`validation::user`](crate::validation::user) |
//! | check a page of keys | [`PageRequestExt::key_page`] with the operation's [`CursorKind`], giving a [`KeyPage`]: read keys from its start (`after`, exclusive, else `prefix`, inclusive) up to [`KeyPage::prefix_end`] (exclusive) in the datastore |
//! | check a page of namespaces | [`PageRequestExt::namespace_page`], giving a [`NamePage`] |
//! | reply with records | [`PageBuilder::for_page`] (or [`page_from_rows`]) from rows read in key order, one more than the limit when more follow |
//! | reply with keys and sizes (`list_keys`) | [`key_info_page`] from `(key, content length)` rows read in key order, one more than the limit when more follow; [`KeyPage::cursor`] at the last key inspected when a bounded scan stops early |
//! | reply with namespaces | [`namespace_page`] from the stored names, one more than the limit when more follow |
//! | check a page of users | [`PageRequestExt::user_page`], giving a [`NamePage`] |
//! | reply with users | [`user_page`] from the stored user ids, one more than the limit when more follow; [`user_cursor`] after the last id inspected when a page stops early |
//! | check a page of applications | [`PageRequestExt::application_page`], giving a [`NamePage`] |
//! | reply with applications | [`application_page`] from the stored application ids, one more than the limit when more follow; [`application_cursor`] after the last id inspected when a page stops early |
//! | continue a bounded scan | [`KeyPage::cursor`] at the last key inspected |
//! | bound and match a `search` or a filtered `list` | [`SearchScan`] with the store's `search_scan_limit` and `search_scan_bytes` (default [`DEFAULT_SEARCH_SCAN_BYTES`]); [`KeyPage::matcher`] checks the query for the page's mode and case and gives the [`TextMatcher`] that confirms each record's content, and the page's [`metadata`](KeyPage::metadata) filter confirms its metadata; [`TextMatcher::prefilter`] says what a datastore may look for first (a superset); cursors from [`KeyPage::cursor`], which binds them to mode, case and filter |
//! | fail | the constructors of [`MemoryError`], with the driver's error as the source of `Storage` |
//!
//! Then run the conformance suite (feature `conformance`) against a real instance of the
//! datastore; see the crate guide's "Writing a provider" and the compiled example
//! `examples/custom_provider.rs`. A provider inside this crate also adds its line to the
//! table behind [`registrations`], through which [`open`](crate::open) finds it by scheme.
//!
//! ```
//! use agent_memory::provider::PageRequestExt;
//! use agent_memory::provider::{key_cursor, page_from_rows, CursorKind};
//! use agent_memory::{MemoryRecord, MemoryScope, PageRequest};
//! # fn decode(key: &str) -> agent_memory::Result<MemoryRecord> {
//! #     Ok(serde_json::from_value(serde_json::json!({
//! #         "scope": {"application_id": "app", "user_id": "user-1"}, "key": key,
//! #         "content": "", "metadata": {}, "revision": "1", "created_at": 0.0,
//! #         "updated_at": 0.0, "expires_at": null, "source": {}})).unwrap())
//! # }
//!
//! let scope = MemoryScope::new("app", "user-1")?;
//! let request = PageRequest::new(2).after(key_cursor(CursorKind::List, &scope, "a"));
//! let page = request.key_page(CursorKind::List, &scope)?;
//! assert_eq!(page.after.as_deref(), Some("a"));
//!
//! // The rows after "a" in key order, over-fetched by one: "d" only says that more follow.
//! let rows = ["b", "c", "d"];
//! let reply = page_from_rows(CursorKind::List, &scope, page.limit, rows, decode)?;
//! assert_eq!(reply.items.len(), 2);
//! let next = PageRequest::new(2).after(reply.next_cursor.expect("more follow"));
//! assert_eq!(next.key_page(CursorKind::List, &scope)?.after.as_deref(), Some("c"));
//! # Ok::<(), agent_memory::MemoryError>(())
//! ```

use crate::error::{MemoryError, Result};
use crate::page::{
    ApplicationPage, Cursor, KeyInfo, KeyInfoPage, MemoryPage, NamespacePage, UserPage,
};
use crate::record::MemoryRecord;
use crate::scope::MemoryScope;

mod options;
mod registry;

pub use crate::connection_url::{ConnectionUrl, HostPort, Params};
pub use crate::error::BoxError;
pub use crate::matching::{fold_case, Needle, Prefilter, TextMatcher};
pub use crate::page::{CursorKind, KeyPage, NamePage, PageRequestExt};
pub use crate::search_scan::{
    contains as search_contains, prefilter as search_prefilter, SearchScan,
    DEFAULT_SEARCH_SCAN_BYTES, PREFILTER_BYTES,
};
pub use crate::write::{WriteCondition, WriteParts};
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
pub(crate) use options::common_setters;
pub use options::CommonOptions;
pub use registry::{registration, registrations, Opener, Registration};

/// A cursor for the operation `kind` in `scope`, continuing after the key `position`, for a
/// page without a `list` prefix (a prefixed page's cursors come from [`KeyPage::cursor`]).
pub fn key_cursor(kind: CursorKind, scope: &MemoryScope, position: &str) -> Cursor {
    Cursor::for_scope(kind, scope, "", "", position)
}

/// A `list_namespaces` cursor for one application user, continuing after the namespace
/// `position` (the empty string for the default namespace).
pub fn namespace_cursor(application_id: &str, user_id: &str, position: &str) -> Cursor {
    Cursor::for_user(application_id, user_id, position)
}

/// A `list_users` cursor for one application, continuing after the user id `position`.
pub fn user_cursor(application_id: &str, position: &str) -> Cursor {
    Cursor::for_application(application_id, position)
}

/// A `list_applications` cursor, continuing after the application id `position`.
pub fn application_cursor(position: &str) -> Cursor {
    Cursor::for_applications(position)
}

/// Collects one page of records read in ascending key order.
///
/// Read rows until [`is_full`](Self::is_full) says the page has its `limit`; then one more row
/// (if the datastore has it) only tells that more follow: pass that to
/// [`finish`](Self::finish), which puts the cursor after the page's last key. Reading one row
/// past the limit ("over-fetching") is how every provider here knows whether a cursor is due
/// without a second query.
#[derive(Debug)]
pub struct PageBuilder<'a> {
    kind: CursorKind,
    scope: &'a MemoryScope,
    /// The checked request whose prefix, mode, case and filter the cursor is bound to.
    page: Option<&'a KeyPage>,
    limit: usize,
    items: Vec<MemoryRecord>,
}

impl<'a> PageBuilder<'a> {
    /// An empty page of at most `limit` records for the operation `kind` in `scope`, without a
    /// `list` prefix.
    pub fn new(kind: CursorKind, scope: &'a MemoryScope, limit: usize) -> Self {
        Self { kind, scope, page: None, limit, items: Vec::with_capacity(limit.min(128)) }
    }

    /// An empty page for the checked request `page` in `scope`: its operation, its limit, and
    /// its prefix and metadata filter, which the page's cursor is bound to.
    pub fn for_page(scope: &'a MemoryScope, page: &'a KeyPage) -> Self {
        Self { page: Some(page), ..Self::new(page.kind, scope, page.limit) }
    }

    /// True once the page holds `limit` records.
    pub fn is_full(&self) -> bool {
        self.items.len() >= self.limit
    }

    /// Adds the next record in key order. A record offered to a full page is dropped: check
    /// [`is_full`](Self::is_full) first, so it is never decoded.
    pub fn push(&mut self, record: MemoryRecord) {
        if !self.is_full() {
            self.items.push(record);
        }
    }

    /// The page; with `more` (a row followed the last one), a cursor after its last key.
    pub fn finish(self, more: bool) -> MemoryPage {
        let next_cursor = match self.items.last() {
            Some(last) if more => Some(match self.page {
                Some(page) => page.cursor(self.scope, &last.key),
                None => Cursor::for_scope(self.kind, self.scope, "", "", &last.key),
            }),
            _ => None,
        };
        MemoryPage { items: self.items, next_cursor }
    }

    /// The page from `rows` in ascending key order, over-fetched by one: rows are decoded into
    /// records until the page is full, and a further row (only taken, never decoded) means
    /// more follow.
    ///
    /// # Errors
    /// The first error `decode` returns.
    pub fn fill<R>(
        mut self,
        rows: impl IntoIterator<Item = R>,
        mut decode: impl FnMut(R) -> Result<MemoryRecord>,
    ) -> Result<MemoryPage> {
        for row in rows {
            if self.is_full() {
                return Ok(self.finish(true));
            }
            self.push(decode(row)?);
        }
        Ok(self.finish(false))
    }
}

/// A page from `rows` in ascending key order, over-fetched by one: the first `limit` rows are
/// decoded into records, and a further row (only taken, never decoded) means more follow. For
/// a page with a `list` prefix, use [`PageBuilder::for_page`] and [`PageBuilder::fill`].
///
/// # Errors
/// The first error `decode` returns.
pub fn page_from_rows<R>(
    kind: CursorKind,
    scope: &MemoryScope,
    limit: usize,
    rows: impl IntoIterator<Item = R>,
    decode: impl FnMut(R) -> Result<MemoryRecord>,
) -> Result<MemoryPage> {
    PageBuilder::new(kind, scope, limit).fill(rows, decode)
}

/// A [`list_keys`](crate::MemoryStore::list_keys) page for the checked request `page` in
/// `scope` from `rows` in ascending key order, over-fetched by one: the first `page.limit`
/// rows are the page, and a further row means more follow (the cursor, bound to the page's
/// prefix, is after the page's last key).
///
/// ```
/// use agent_memory::provider::PageRequestExt;
/// use agent_memory::provider::{key_info_page, CursorKind};
/// use agent_memory::{KeyInfo, MemoryScope, PageRequest};
///
/// let scope = MemoryScope::new("app", "user-1")?;
/// let page = PageRequest::new(2).prefix("notes/").key_page(CursorKind::Keys, &scope)?;
/// let rows = [("notes/a", 3), ("notes/b", 10), ("notes/c", 0)];
/// let reply = key_info_page(&scope, &page, rows.map(|(k, n)| KeyInfo::new(k, n)));
/// assert_eq!(reply.items, [KeyInfo::new("notes/a", 3), KeyInfo::new("notes/b", 10)]);
/// let next = PageRequest::new(2).prefix("notes/").after(reply.next_cursor.expect("more"));
/// assert_eq!(next.key_page(CursorKind::Keys, &scope)?.after.as_deref(), Some("notes/b"));
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
pub fn key_info_page(
    scope: &MemoryScope,
    page: &KeyPage,
    rows: impl IntoIterator<Item = KeyInfo>,
) -> KeyInfoPage {
    let mut rows = rows.into_iter();
    let items: Vec<KeyInfo> = rows.by_ref().take(page.limit).collect();
    let next_cursor = match items.last() {
        Some(last) if rows.next().is_some() => Some(page.cursor(scope, &last.key)),
        _ => None,
    };
    KeyInfoPage { items, next_cursor }
}

/// A page of one application user's namespaces from the stored names (the empty string for the
/// default namespace) in ascending byte order, over-fetched by one: a name after the first
/// `limit` means more follow.
///
/// # Errors
/// [`Storage`](MemoryError::Storage) from `provider` when a stored name is not a valid
/// namespace (the datastore holds something this crate could not have written).
pub fn namespace_page(
    provider: &'static str,
    application_id: &str,
    user_id: &str,
    limit: usize,
    names: impl IntoIterator<Item = String>,
) -> Result<NamespacePage> {
    let base = MemoryScope::new(application_id, user_id)?;
    let mut names = names.into_iter();
    let mut items = Vec::with_capacity(limit.min(128));
    let mut last = None;
    for name in names.by_ref().take(limit) {
        let scope = match name.as_str() {
            "" => base.clone(),
            named => base.with_namespace(named).map_err(|_| {
                MemoryError::storage(provider, "a stored namespace name is unreadable")
            })?,
        };
        items.push(scope);
        last = Some(name);
    }
    let next_cursor = match last {
        Some(last) if names.next().is_some() => {
            Some(namespace_cursor(application_id, user_id, &last))
        }
        _ => None,
    };
    Ok(NamespacePage { items, next_cursor })
}

/// A page of one application's user ids from the stored ids in ascending byte order,
/// over-fetched by one: an id after the first `limit` means more follow.
///
/// ```
/// use agent_memory::provider::PageRequestExt;
/// use agent_memory::provider::user_page;
/// use agent_memory::PageRequest;
///
/// let ids = ["a", "b", "c"].map(String::from);
/// let page = user_page("example", "app", 2, ids)?;
/// assert_eq!(page.items, ["a", "b"]);
/// let next = PageRequest::new(2).after(page.next_cursor.expect("more follow"));
/// assert_eq!(next.user_page("app")?.after.as_deref(), Some("b"));
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
///
/// # Errors
/// [`Invalid`](MemoryError::Invalid) naming `application_id` for a bad application id;
/// [`Storage`](MemoryError::Storage) from `provider` when a stored id is not a valid user id
/// (the datastore holds something this crate could not have written).
pub fn user_page(
    provider: &'static str,
    application_id: &str,
    limit: usize,
    ids: impl IntoIterator<Item = String>,
) -> Result<UserPage> {
    crate::validation::id("application_id", application_id)?;
    let (items, next_cursor) =
        id_page(provider, ("user_id", "a stored user id is unreadable"), limit, ids)?;
    Ok(UserPage { next_cursor: next_cursor.map(|last| user_cursor(application_id, &last)), items })
}

/// A page of the store's application ids from the stored ids in ascending byte order,
/// over-fetched by one: an id after the first `limit` means more follow.
///
/// ```
/// use agent_memory::provider::PageRequestExt;
/// use agent_memory::provider::application_page;
/// use agent_memory::PageRequest;
///
/// let ids = ["app-a", "app-b", "app-c"].map(String::from);
/// let page = application_page("example", 2, ids)?;
/// assert_eq!(page.items, ["app-a", "app-b"]);
/// let next = PageRequest::new(2).after(page.next_cursor.expect("more follow"));
/// assert_eq!(next.application_page()?.after.as_deref(), Some("app-b"));
/// # Ok::<(), agent_memory::MemoryError>(())
/// ```
///
/// # Errors
/// [`Storage`](MemoryError::Storage) from `provider` when a stored id is not a valid
/// application id (the datastore holds something this crate could not have written).
pub fn application_page(
    provider: &'static str,
    limit: usize,
    ids: impl IntoIterator<Item = String>,
) -> Result<ApplicationPage> {
    let (items, next_cursor) =
        id_page(provider, ("application_id", "a stored application id is unreadable"), limit, ids)?;
    Ok(ApplicationPage { next_cursor: next_cursor.map(|last| application_cursor(&last)), items })
}

/// The first `limit` of `ids`, each checked as an id of `field` (a `Storage` error saying
/// `unreadable` when one is not), and the last of them when more follow (the position the next
/// page's cursor continues after).
fn id_page(
    provider: &'static str,
    (field, unreadable): (&'static str, &'static str),
    limit: usize,
    ids: impl IntoIterator<Item = String>,
) -> Result<(Vec<String>, Option<String>)> {
    let mut ids = ids.into_iter();
    let mut items = Vec::with_capacity(limit.min(128));
    for id in ids.by_ref().take(limit) {
        crate::validation::id(field, &id)
            .map_err(|_| MemoryError::storage(provider, unreadable))?;
        items.push(id);
    }
    let last = items.last().filter(|_| ids.next().is_some()).cloned();
    Ok((items, last))
}
