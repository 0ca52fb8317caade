//! A provider written outside the crate: an ordered map in one process, built only from
//! `agent_memory`'s public API and its provider toolkit, `agent_memory::provider`.
//!
//! Run it with `cargo run -p agent-memory --example custom_provider`. The test
//! `tests/custom_provider.rs` includes this file and runs the whole conformance suite on
//! [`MapStore`], exactly as a provider in another crate would.
//!
//! Every method follows the same three steps:
//!
//! 1. check the input with the shared rules (`MemoryWrite::validate`, `validation::key`,
//!    `PageRequest::key_page`, ...) before touching any data, so bad input gets `Invalid` and
//!    changes nothing;
//! 2. do the work as one atomic step (here: under one lock; in a database: one transaction);
//! 3. build the reply with the toolkit's page helpers, which also make the cursors.
//!
//! It keeps the whole `MemoryStore` contract: revisions never reused, byte-order keys, expiry
//! by an injectable clock, bounded search, and per-user quotas with the shared
//! `agent_memory::quota` helpers (counted here by a scan of the user's records under the
//! write lock: simple, and right for a small store; a database keeps a usage row instead).
//! Observation comes from the toolkit too: `main` wraps the store in
//! `agent_memory::observe::Observed`, which gives every operation the same span and metrics as
//! the built-in providers' (`db.system.name` = `map`). Left out: opening by URL (a provider in
//! another crate is built directly; one inside this crate adds a line to
//! `agent_memory::provider::registrations`, and would read its URL with
//! `agent_memory::provider::ConnectionUrl` and `CommonOptions`).

use agent_memory::provider::PageRequestExt;
use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_memory::observe::Observed;
use agent_memory::provider::{
    application_page, key_cursor, key_info_page, namespace_page, user_page, CursorKind, KeyPage,
    PageBuilder, SearchScan, WriteCondition, WriteParts, DEFAULT_SEARCH_SCAN_BYTES,
};
use agent_memory::quota::{self, Usage, UsageChange};
use agent_memory::{
    validation, ApplicationPage, Clock, KeyInfo, KeyInfoPage, ManualClock, MemoryCleanupPage,
    MemoryError, MemoryPage, MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, NamespacePage,
    PageRequest, Quotas, Result, Revision, SystemClock, Timestamp, UserPage,
};

/// The name this provider gives in `Storage` errors.
const PROVIDER: &str = "map";

/// Keys one `search` call inspects at most; the byte budget is the shared default.
const SEARCH_SCAN_LIMIT: usize = 1_000;

/// Where one record lives: application id, user id, namespace ("" for the default), key.
///
/// One ordered map over this tuple keeps every listing a range scan in byte order: a scope's
/// keys, a user's namespaces, an application's users and the applications all sort together.
type Address = (String, String, String, String);

/// What is stored for one key: the record as `get` returns it, and what it is charged.
///
/// Keeping the whole record (its scope and key included, though the address repeats them)
/// makes every read a clone; a database provider stores columns and builds the record from
/// its row instead.
#[derive(Debug, Clone)]
struct Stored {
    record: MemoryRecord,
    /// What the record is charged against quotas, by `quota::record_bytes`.
    bytes: u64,
}

impl Stored {
    /// An expired record is gone for every read, even before `purge_expired` removes it.
    fn is_live(&self, now: Timestamp) -> bool {
        self.record.expires_at.is_none_or(|at| at > now)
    }
}

/// An ordered-map store: every record in one `BTreeMap` behind one mutex.
#[derive(Debug)]
pub struct MapStore {
    clock: Arc<dyn Clock>,
    quotas: Quotas,
    started: AtomicBool,
    /// Revisions come from a counter that only grows, so a revision is never reused, not even
    /// for a key deleted and written again.
    next_revision: AtomicU64,
    records: Mutex<BTreeMap<Address, Stored>>,
}

impl MapStore {
    /// A store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// A store reading time from `clock`; tests pass a [`ManualClock`] and move it.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self::with_quotas(clock, Quotas::unlimited())
    }

    /// A store reading time from `clock` that holds each application user to `quotas`.
    pub fn with_quotas(clock: Arc<dyn Clock>, quotas: Quotas) -> Self {
        Self {
            clock,
            quotas,
            started: AtomicBool::new(false),
            next_revision: AtomicU64::new(1),
            records: Mutex::new(BTreeMap::new()),
        }
    }

    /// One bounded scan of `page`'s keys: `search`, and `list` with a metadata filter. The
    /// scan is bounded in keys and bytes, so one call never reads a whole large scope; when
    /// the budget runs out the reply carries a cursor after the last key inspected and the
    /// caller continues from there.
    fn scan(
        &self,
        scope: &MemoryScope,
        page: &KeyPage,
        keep: impl Fn(&Stored) -> bool,
    ) -> Result<MemoryPage> {
        let now = self.clock.now();
        let records = self.records()?;
        let mut scan = SearchScan::new(SEARCH_SCAN_LIMIT, DEFAULT_SEARCH_SCAN_BYTES);
        let mut items: Vec<MemoryRecord> = Vec::new();
        let mut last_inspected: Option<&str> = None;
        for (key, stored) in in_page(&records, scope, page) {
            if !scan.has_room() {
                // `KeyPage::cursor` binds the cursor to the page's mode, case and filter.
                let next_cursor = last_inspected.map(|last| page.cursor(scope, last));
                return Ok(MemoryPage { items, next_cursor });
            }
            scan.inspect(stored.record.content.len());
            last_inspected = Some(key);
            if stored.is_live(now) && page.metadata.matches(&stored.record.metadata) && keep(stored)
            {
                if items.len() == page.limit {
                    // Another match follows a full page: continue after the page's last key.
                    let next_cursor = items.last().map(|last| page.cursor(scope, &last.key));
                    return Ok(MemoryPage { items, next_cursor });
                }
                items.push(stored.record.clone());
            }
        }
        Ok(MemoryPage { items, next_cursor: None })
    }

    /// The records, once `start` has run: before it, every operation is `Storage`.
    fn records(&self) -> Result<MutexGuard<'_, BTreeMap<Address, Stored>>> {
        if !self.started.load(Ordering::Acquire) {
            return Err(MemoryError::not_started(PROVIDER));
        }
        // A panic while holding the lock cannot leave a half-made change: each change is one
        // map operation. So a poisoned lock is still safe to use.
        Ok(self.records.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    fn new_revision(&self) -> Result<Revision> {
        let n = self.next_revision.fetch_add(1, Ordering::Relaxed);
        Revision::new(format!("{n:x}"))
    }
}

impl Default for MapStore {
    fn default() -> Self {
        Self::new()
    }
}

/// The address of `key` in `scope`.
fn address(scope: &MemoryScope, key: &str) -> Address {
    (
        scope.application_id().to_owned(),
        scope.user_id().to_owned(),
        scope.namespace_or_empty().to_owned(),
        key.to_owned(),
    )
}

/// The records of `scope` within the checked page: keys after `page.after` (exclusive), else
/// from `page.prefix` (inclusive), up to `page.prefix_end()` (exclusive), in key order.
fn in_page<'a>(
    records: &'a BTreeMap<Address, Stored>,
    scope: &MemoryScope,
    page: &KeyPage,
) -> impl Iterator<Item = (&'a str, &'a Stored)> {
    let start = match &page.after {
        Some(after) => Excluded(address(scope, after)),
        None => Included(address(scope, &page.prefix)),
    };
    let (app, user, ns) =
        (scope.application_id().to_owned(), scope.user_id().to_owned(), scope.namespace_or_empty());
    let ns = ns.to_owned();
    let end = page.prefix_end();
    records
        .range((start, Unbounded))
        .take_while(move |((a, u, n, k), _)| {
            a == &app && u == &user && n == &ns && end.as_deref().is_none_or(|end| k.as_str() < end)
        })
        .map(|((_, _, _, key), stored)| (key.as_str(), stored))
}

#[async_trait::async_trait]
impl MemoryStore for MapStore {
    async fn start(&self) -> Result<()> {
        self.started.store(true, Ordering::Release);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        // Nothing to release; the records stay readable, as the in-process provider's do.
        Ok(())
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        let now = self.clock.now();
        // 1. Check everything (key, content, metadata, expiry) before touching data.
        write.validate(key, now)?;
        let mut records = self.records()?;
        let at = address(scope, key);
        let held_before = records.get(&at).map(|stored| stored.bytes);
        let live =
            records.get(&at).filter(|stored| stored.is_live(now)).map(|stored| &stored.record);
        let parts = WriteParts::from(write);
        let bytes = quota::record_bytes(key, &parts.content, &parts.metadata, &parts.source);
        // 2. The condition is checked against the live record, under the same lock as the write.
        match &parts.condition {
            WriteCondition::Always => {}
            WriteCondition::CreateOnly if live.is_some() => {
                return Err(MemoryError::already_exists())
            }
            WriteCondition::CreateOnly => {}
            WriteCondition::Revision(expected) if live.is_some_and(|s| &s.revision == expected) => {
            }
            WriteCondition::Revision(_) => return Err(MemoryError::stale_revision()),
        }
        // Quotas count every record the user holds, expired ones too until purged.
        if !self.quotas.is_unlimited() {
            let usage = user_records(&records, scope.application_id(), scope.user_id()).fold(
                Usage::default(),
                |usage, (_, stored)| Usage {
                    records: usage.records + 1,
                    bytes: usage.bytes.saturating_add(stored.bytes),
                },
            );
            self.quotas.admit(usage, UsageChange::of_write(held_before, bytes))?;
        }
        // An expired record is gone: writing its key again creates a new record.
        let created_at = live.map_or(now, |record| record.created_at);
        let record = MemoryRecord {
            scope: scope.clone(),
            key: key.to_owned(),
            content: parts.content,
            metadata: parts.metadata,
            revision: self.new_revision()?,
            created_at,
            updated_at: now,
            expires_at: parts.expires_at,
            source: parts.source,
        };
        records.insert(at, Stored { record: record.clone(), bytes });
        Ok(record)
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let now = self.clock.now();
        let records = self.records()?;
        let found = records.get(&address(scope, key)).filter(|stored| stored.is_live(now));
        Ok(found.map(|stored| stored.record.clone()))
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        // The checked page: limit, prefix, and the cursor decoded and bound to this scope.
        let page = page.key_page(CursorKind::List, scope)?;
        if !page.metadata.is_empty() {
            // A metadata filter may pass few records: a bounded scan, as `search` is.
            return self.scan(scope, &page, |_| true);
        }
        let now = self.clock.now();
        let records = self.records()?;
        let live = in_page(&records, scope, &page).filter(|(_, stored)| stored.is_live(now));
        // `fill` decodes rows up to the limit and takes one more only to know whether a cursor
        // is due.
        PageBuilder::for_page(scope, &page).fill(live, |(_, stored)| Ok(stored.record.clone()))
    }

    async fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> Result<KeyInfoPage> {
        let page = page.key_page(CursorKind::Keys, scope)?;
        let now = self.clock.now();
        let records = self.records()?;
        let live = in_page(&records, scope, &page).filter(|(_, stored)| stored.is_live(now)).map(
            |(key, stored)| {
                KeyInfo::new(key, u64::try_from(stored.record.content.len()).unwrap_or(u64::MAX))
            },
        );
        Ok(key_info_page(scope, &page, live))
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        // The checked page carries the match mode, the case and the metadata filter; the
        // matcher checks the query for them and is the one every provider confirms with.
        let page = page.key_page(CursorKind::Search, scope)?;
        let matcher = page.matcher(query)?;
        self.scan(scope, &page, |stored| matcher.matches(&stored.record.content))
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        validation::key(key)?;
        let now = self.clock.now();
        let mut records = self.records()?;
        let at = address(scope, key);
        let live_revision = records.get(&at).filter(|s| s.is_live(now)).map(|s| &s.record.revision);
        if expected_revision.is_some_and(|expected| live_revision != Some(expected)) {
            return Err(MemoryError::stale_revision());
        }
        let existed = live_revision.is_some();
        // An expired record goes too, but was already gone for the caller.
        records.remove(&at);
        Ok(existed)
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let mut records = self.records()?;
        let ns = scope.namespace_or_empty();
        let keys: Vec<Address> = records
            .range(address(scope, "")..)
            .take_while(|((a, u, n, _), _)| {
                a == scope.application_id() && u == scope.user_id() && n == ns
            })
            .map(|(at, _)| at.clone())
            .collect();
        keys.iter().for_each(|at| {
            records.remove(at);
        });
        Ok(keys.len() as u64)
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let mut records = self.records()?;
        let keys: Vec<Address> =
            user_records(&records, application_id, user_id).map(|(at, _)| at.clone()).collect();
        keys.iter().for_each(|at| {
            records.remove(at);
        });
        Ok(keys.len() as u64)
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        let page = page.namespace_page(application_id, user_id)?;
        let records = self.records()?;
        // Walk the user's records in order, collecting distinct names after the cursor, one more
        // than the limit (so the helper knows whether a cursor is due). Simple, but it walks
        // every record of the namespaces it passes: a database would index the names instead.
        let mut names: Vec<String> = Vec::new();
        for ((a, u, n, _), _) in records.range(user_start(application_id, user_id)..) {
            if a != application_id || u != user_id || names.len() > page.limit {
                break;
            }
            let after_cursor = page.after.as_deref().is_none_or(|after| n.as_str() > after);
            if after_cursor && names.last() != Some(n) {
                names.push(n.clone());
            }
        }
        namespace_page(PROVIDER, application_id, user_id, page.limit, names)
    }

    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage> {
        let page = page.user_page(application_id)?;
        let records = self.records()?;
        let mut ids: Vec<String> = Vec::new();
        for ((a, u, _, _), _) in records.range(user_start(application_id, "")..) {
            if a != application_id || ids.len() > page.limit {
                break;
            }
            let after_cursor = page.after.as_deref().is_none_or(|after| u.as_str() > after);
            if after_cursor && ids.last() != Some(u) {
                ids.push(u.clone());
            }
        }
        user_page(PROVIDER, application_id, page.limit, ids)
    }

    async fn list_applications(&self, page: PageRequest) -> Result<ApplicationPage> {
        let page = page.application_page()?;
        let records = self.records()?;
        let mut ids: Vec<String> = Vec::new();
        for ((a, _, _, _), _) in records.iter() {
            if ids.len() > page.limit {
                break;
            }
            let after_cursor = page.after.as_deref().is_none_or(|after| a.as_str() > after);
            if after_cursor && ids.last() != Some(a) {
                ids.push(a.clone());
            }
        }
        application_page(PROVIDER, page.limit, ids)
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        // A purge page inspects at most `limit` keys, expired or not, so one call is bounded.
        let page = page.key_page(CursorKind::Purge, scope)?;
        let now = self.clock.now();
        let mut records = self.records()?;
        let (batch, more) = {
            let mut inspected = in_page(&records, scope, &page);
            let batch: Vec<(String, bool)> = inspected
                .by_ref()
                .take(page.limit)
                .map(|(key, stored)| (key.to_owned(), !stored.is_live(now)))
                .collect();
            (batch, inspected.next().is_some())
        };
        let mut deleted = 0;
        for (key, _) in batch.iter().filter(|(_, expired)| *expired) {
            records.remove(&address(scope, key));
            deleted += 1;
        }
        let next_cursor = match batch.last() {
            Some((last, _)) if more => Some(key_cursor(CursorKind::Purge, scope, last)),
            _ => None,
        };
        Ok(MemoryCleanupPage { deleted, next_cursor })
    }
}

/// Every record of one application user, in every namespace.
fn user_records<'a>(
    records: &'a BTreeMap<Address, Stored>,
    application_id: &'a str,
    user_id: &'a str,
) -> impl Iterator<Item = (&'a Address, &'a Stored)> {
    records
        .range(user_start(application_id, user_id)..)
        .take_while(move |((a, u, _, _), _)| a == application_id && u == user_id)
}

/// The first address of a user's records (the first, with `user_id` "", of an application's).
fn user_start(application_id: &str, user_id: &str) -> Address {
    (application_id.to_owned(), user_id.to_owned(), String::new(), String::new())
}

/// The store in use: write, read, list, search, and expiry by a clock the program moves.
#[allow(dead_code)] // The conformance test includes this file as a module, without `main`.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let clock = ManualClock::starting_now();
    let store = Observed::new(PROVIDER, MapStore::with_clock(Arc::new(clock.clone())));
    store.start().await?;
    let scope = MemoryScope::new("example-app", "user-1")?;

    let first = store.put(&scope, "notes/tea", MemoryWrite::new("likes green tea")).await?;
    // Replace it only if nobody changed it since we read it.
    let update = MemoryWrite::new("likes green tea, no sugar").expected_revision(first.revision);
    store.put(&scope, "notes/tea", update).await?;
    let soon = clock.now().saturating_add(std::time::Duration::from_secs(60));
    store.put(&scope, "otp", MemoryWrite::new("123456").expires_at(soon)).await?;

    let page = store.list(&scope, PageRequest::new(10).prefix("notes/")).await?;
    println!("notes: {}", page.items.len());
    let found = store.search(&scope, "sugar", PageRequest::new(10)).await?;
    println!("matches for \"sugar\": {}", found.items.len());

    clock.advance(std::time::Duration::from_secs(61));
    println!("otp after a minute: {:?}", store.get(&scope, "otp").await?.map(|r| r.content));
    let purged = store.purge_expired(&scope, PageRequest::new(100)).await?;
    println!("purged: {}", purged.deleted);
    store.close().await
}
