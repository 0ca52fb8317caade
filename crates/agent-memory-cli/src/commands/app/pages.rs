//! The pagers the whole-application commands share: ids page by page (`users`, `apps`), and
//! one user's records namespace by namespace, page by page.

use agent_memory::provider::{application_cursor, user_cursor};
use agent_memory::{
    validation::MAX_PAGE_LIMIT, Cursor, MemoryRecord, MemoryScope, MemoryStore, PageRequest,
};

use crate::exit::CliResult;
use crate::output::{escape_text, Output};
use crate::progress;

/// What an [`IdPages`] walks.
#[derive(Debug, Clone, Copy)]
pub(super) enum Listing<'a> {
    /// The users of one application (`list_users`).
    Users(&'a str),
    /// The applications of the store (`list_applications`).
    Applications,
}

/// The users of one application, or the applications of the store, one bounded page at a
/// time.
pub struct IdPages<'a> {
    store: &'a dyn MemoryStore,
    listing: Listing<'a>,
    cursor: Option<Cursor>,
    started: bool,
}

impl<'a> IdPages<'a> {
    /// Walks the users of `application_id`, starting after the user id `after` (the first
    /// user without one).
    pub fn users(store: &'a dyn MemoryStore, application_id: &'a str, after: Option<&str>) -> Self {
        let cursor = after.map(|user| user_cursor(application_id, user));
        Self { store, listing: Listing::Users(application_id), cursor, started: false }
    }

    /// Walks the applications of the store, starting after the application id `after` (the
    /// first application without one).
    pub fn applications(store: &'a dyn MemoryStore, after: Option<&str>) -> Self {
        let cursor = after.map(application_cursor);
        Self { store, listing: Listing::Applications, cursor, started: false }
    }

    /// The next page of ids (up to `limit`, possibly none while more follow), or `None` once
    /// the listing is done.
    ///
    /// # Errors
    /// As [`MemoryStore::list_users`] and [`MemoryStore::list_applications`].
    pub async fn next(&mut self, limit: usize) -> CliResult<Option<Vec<String>>> {
        if self.started && self.cursor.is_none() {
            return Ok(None);
        }
        self.started = true;
        let request = PageRequest::new(limit).after_opt(self.cursor.take());
        let (items, cursor) = match self.listing {
            Listing::Users(application_id) => {
                let page = self.store.list_users(application_id, request).await?;
                (page.items, page.next_cursor)
            }
            Listing::Applications => {
                let page = self.store.list_applications(request).await?;
                (page.items, page.next_cursor)
            }
        };
        self.cursor = cursor;
        Ok(Some(items))
    }

    /// Whether more pages may follow.
    pub fn more(&self) -> bool {
        !self.started || self.cursor.is_some()
    }
}

/// How `users` and `apps` name what they print.
pub(super) struct Names {
    /// The JSON field of one id.
    field: &'static str,
    /// What they are, in "more users" and "no users".
    plural: &'static str,
}

pub(super) const USERS: Names = Names { field: "user_id", plural: "users" };
pub(super) const APPLICATIONS: Names = Names { field: "application_id", plural: "applications" };

/// `users` and `apps`: up to `limit` ids, or all with `all`; the id to continue after is
/// printed on stderr, keeping stdout pure ids.
pub(super) async fn print_ids(
    mut pages: IdPages<'_>,
    names: &Names,
    limit: usize,
    all: bool,
    out: &mut Output,
) -> CliResult {
    let mut printed = 0usize;
    let mut last: Option<String> = None;
    loop {
        let want = if all { limit } else { limit - printed };
        let Some(ids) = pages.next(want).await? else { break };
        for id in ids {
            if out.is_json() {
                let mut object = serde_json::Map::new();
                object.insert(names.field.to_owned(), id.clone().into());
                out.json_line(&serde_json::Value::Object(object))?;
            } else {
                out.line(&escape_text(&id))?;
            }
            printed += 1;
            last = Some(id);
        }
        if !pages.more() || (!all && printed >= limit) {
            break;
        }
    }
    if pages.more() {
        if let Some(last) = last {
            out.flush()?;
            progress::eprintln_safe(&format!(
                "more {}: continue with --after {}",
                names.plural,
                escape_text(&last)
            ));
        }
    }
    if printed == 0 && !out.is_json() {
        out.line(&format!("no {}", names.plural))?;
    }
    Ok(())
}

/// Every live record of one user, namespace by namespace in ascending order and keys
/// ascending within each, one bounded page at a time: `each` sees every page.
///
/// # Errors
/// A store error, or the first error of `each`.
pub async fn each_page<F>(
    store: &dyn MemoryStore,
    application_id: &str,
    user_id: &str,
    mut each: F,
) -> CliResult<u64>
where
    F: AsyncFnMut(&MemoryScope, Vec<MemoryRecord>) -> CliResult,
{
    let mut namespaces = 0u64;
    every_page(async |request| {
        let page = store.list_namespaces(application_id, user_id, request).await?;
        for scope in &page.items {
            namespaces += 1;
            every_page(async |request| {
                let records = store.list(scope, request).await?;
                each(scope, records.items).await?;
                Ok(records.next_cursor)
            })
            .await?;
        }
        Ok(page.next_cursor)
    })
    .await?;
    Ok(namespaces)
}

/// Asks `page` for every page of one listing, [`MAX_PAGE_LIMIT`] at a time from the first:
/// each call gets the next page's request and answers with the cursor the store returned,
/// until there is none.
///
/// # Errors
/// The first error of `page`.
pub async fn every_page(
    mut page: impl AsyncFnMut(PageRequest) -> CliResult<Option<Cursor>>,
) -> CliResult {
    let mut cursor = None;
    loop {
        cursor = page(PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor)).await?;
        if cursor.is_none() {
            return Ok(());
        }
    }
}

/// Every live record of one user, as [`each_page`] walks them, one bounded page per call
/// to [`next`](Self::next): usable inside a spawned task, where a closure's future could not
/// be proven `Send`.
pub(super) struct RecordPages<'a> {
    store: &'a dyn MemoryStore,
    application_id: &'a str,
    user_id: &'a str,
    namespaces: std::vec::IntoIter<MemoryScope>,
    namespace_cursor: Option<Cursor>,
    namespaces_done: bool,
    current: Option<(MemoryScope, Option<Cursor>)>,
}

impl<'a> RecordPages<'a> {
    pub(super) fn new(
        store: &'a dyn MemoryStore,
        application_id: &'a str,
        user_id: &'a str,
    ) -> Self {
        Self {
            store,
            application_id,
            user_id,
            namespaces: Vec::new().into_iter(),
            namespace_cursor: None,
            namespaces_done: false,
            current: None,
        }
    }

    /// The next page of records with its namespace, or `None` once the user is done.
    pub(super) async fn next(&mut self) -> CliResult<Option<(MemoryScope, Vec<MemoryRecord>)>> {
        loop {
            if let Some((scope, cursor)) = self.current.take() {
                let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(cursor);
                let page = self.store.list(&scope, request).await?;
                if let Some(next) = page.next_cursor {
                    self.current = Some((scope.clone(), Some(next)));
                }
                return Ok(Some((scope, page.items)));
            }
            if let Some(scope) = self.namespaces.next() {
                self.current = Some((scope, None));
                continue;
            }
            if self.namespaces_done {
                return Ok(None);
            }
            let request = PageRequest::new(MAX_PAGE_LIMIT).after_opt(self.namespace_cursor.take());
            let page =
                self.store.list_namespaces(self.application_id, self.user_id, request).await?;
            self.namespace_cursor = page.next_cursor;
            self.namespaces_done = self.namespace_cursor.is_none();
            self.namespaces = page.items.into_iter();
        }
    }
}
