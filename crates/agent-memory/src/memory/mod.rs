//! [`InMemoryStore`], the process-local provider for tests and single-process programs.

use crate::provider::PageRequestExt;
use crate::write::WriteParts;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{MemoryError, Result};
use crate::page::{
    ApplicationPage, CursorKind, KeyInfo, KeyInfoPage, KeyPage, MemoryCleanupPage, MemoryPage,
    NamespacePage, PageRequest, UserPage,
};
use crate::provider::{
    self, key_cursor, key_info_page, PageBuilder, SearchScan, DEFAULT_SEARCH_SCAN_BYTES,
};
use crate::quota::{self, Quotas, Usage, UsageChange};
use crate::record::{MemoryRecord, Metadata, Revision, Source};
use crate::scope::MemoryScope;
// The trait comes from `observe`'s one instrumented impl; the docs still link to it.
#[cfg(doc)]
use crate::store::MemoryStore;
use crate::time::{Clock, SystemClock, Timestamp};
use crate::validation;
use crate::write::{MemoryWrite, WriteCondition};

mod config;

pub use config::InMemoryStoreBuilder;

const PROVIDER: &str = "memory";

/// Keys one `search` call inspects at most, as the SQLite and PostgreSQL defaults; the byte
/// budget is the shared default, [`DEFAULT_SEARCH_SCAN_BYTES`]. Both bound how long one call
/// holds the read lock that writers wait for.
const SEARCH_SCAN_LIMIT: usize = 1_000;

/// Keeps memories in this process; everything is lost when it exits.
///
/// Meant for tests and single-process programs. It keeps the whole contract, including
/// revisions that are never reused, byte-order keys and expiry, and takes an injectable
/// [`Clock`] so tests can move time instead of sleeping. [`close`](MemoryStore::close) releases
/// nothing: records stay readable afterwards so tests can inspect what was written.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::{sync::Arc, time::Duration};
/// use agent_memory::{Clock, InMemoryStore, ManualClock, MemoryScope, MemoryStore, MemoryWrite};
///
/// let clock = ManualClock::starting_now();
/// let store = InMemoryStore::with_clock(Arc::new(clock.clone()));
/// store.start().await?;
/// let scope = MemoryScope::new("app", "user-1")?;
/// let soon = clock.now().saturating_add(Duration::from_secs(60));
/// store.put(&scope, "otp", MemoryWrite::new("123456").expires_at(soon)).await?;
/// clock.advance(Duration::from_secs(61));
/// assert!(store.get(&scope, "otp").await?.is_none());
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct InMemoryStore {
    clock: Arc<dyn Clock>,
    quotas: Quotas,
    started: AtomicBool,
    next_revision: AtomicU64,
    data: RwLock<Users>,
}

/// (application id, user id) → namespace ("" for the default) → key → record, with what the
/// user holds in all.
///
/// One hash lookup finds a user, by borrowed ids; namespaces and keys are ordered maps because
/// listing pages them in byte order. Beside them, the applications in byte order and each
/// one's user ids in byte order, for `list_applications` and `list_users`: a user's entry
/// exists exactly while its [`Held`] does, and an application's while it has a user.
#[derive(Debug, Default)]
struct Users {
    held: hashbrown::HashMap<UserKey, Held>,
    by_application: BTreeMap<Box<str>, BTreeSet<Box<str>>>,
}

impl Users {
    fn get(&self, ids: &UserIds<'_>) -> Option<&Held> {
        self.held.get(ids)
    }

    fn get_mut(&mut self, ids: &UserIds<'_>) -> Option<&mut Held> {
        self.held.get_mut(ids)
    }

    /// The user's entry, created (and indexed) when it is new.
    fn ensure(&mut self, ids: &UserIds<'_>) -> &mut Held {
        if !self.held.contains_key(ids) {
            match self.by_application.get_mut(ids.application_id) {
                Some(users) => {
                    users.insert(ids.user_id.into());
                }
                None => {
                    let users = BTreeSet::from([Box::from(ids.user_id)]);
                    self.by_application.insert(ids.application_id.into(), users);
                }
            }
        }
        self.held.entry_ref(ids).or_default()
    }

    fn remove(&mut self, ids: &UserIds<'_>) -> Option<Held> {
        let held = self.held.remove(ids)?;
        if let Some(users) = self.by_application.get_mut(ids.application_id) {
            users.remove(ids.user_id);
            if users.is_empty() {
                self.by_application.remove(ids.application_id);
            }
        }
        Some(held)
    }
}

/// Everything one application user holds, and its [`Usage`] for quotas, kept up to date by
/// every write and removal under the same lock.
#[derive(Debug, Default)]
struct Held {
    namespaces: Namespaces,
    usage: Usage,
}

/// Takes a removed record off its user's usage.
trait Release {
    fn release(&mut self, stored: &Stored);
}

impl Release for Usage {
    fn release(&mut self, stored: &Stored) {
        self.records = self.records.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(stored.bytes);
    }
}

type Namespaces = BTreeMap<String, Keys>;
type Keys = BTreeMap<String, Stored>;

/// The owned key of one application's user in [`Users`].
#[derive(Debug, PartialEq, Eq, Hash)]
struct UserKey {
    application_id: Box<str>,
    user_id: Box<str>,
}

/// A borrowed [`UserKey`] for lookups. The derived `Hash` feeds the same values in the same
/// order as `UserKey`'s, which `Equivalent` requires.
#[derive(Hash)]
struct UserIds<'a> {
    application_id: &'a str,
    user_id: &'a str,
}

impl<'a> UserIds<'a> {
    fn of(scope: &'a MemoryScope) -> Self {
        Self { application_id: scope.application_id(), user_id: scope.user_id() }
    }
}

impl hashbrown::Equivalent<UserKey> for UserIds<'_> {
    fn equivalent(&self, key: &UserKey) -> bool {
        *key.application_id == *self.application_id && *key.user_id == *self.user_id
    }
}

impl From<&UserIds<'_>> for UserKey {
    fn from(ids: &UserIds<'_>) -> Self {
        Self { application_id: ids.application_id.into(), user_id: ids.user_id.into() }
    }
}

#[derive(Debug, Clone)]
struct Stored {
    content: String,
    metadata: Metadata,
    revision: Revision,
    created_at: Timestamp,
    updated_at: Timestamp,
    expires_at: Option<Timestamp>,
    source: Source,
    /// What the record is charged, by [`quota::record_bytes`].
    bytes: u64,
}

impl Stored {
    fn is_live(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }

    fn to_record(&self, scope: &MemoryScope, key: &str) -> MemoryRecord {
        MemoryRecord {
            scope: scope.clone(),
            key: key.to_owned(),
            content: self.content.clone(),
            metadata: self.metadata.clone(),
            revision: self.revision.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            expires_at: self.expires_at,
            source: self.source.clone(),
        }
    }
}

impl Default for InMemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryStore {
    /// [`scan_page`] over one namespace, under the read lock.
    fn scan(
        &self,
        scope: &MemoryScope,
        page: &KeyPage,
        keep: impl Fn(&Stored) -> bool,
    ) -> Result<MemoryPage> {
        let now = self.clock.now();
        let users = self.read()?;
        let rows = namespace(&users, scope).into_iter().flat_map(|keys| keys_in_page(keys, page));
        Ok(scan_page(rows, scope, page, now, keep))
    }

    /// An empty store on the system clock. Call [`start`](MemoryStore::start) before use.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store reading time from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self::unstarted(clock, Quotas::unlimited())
    }

    pub(super) fn unstarted(clock: Arc<dyn Clock>, quotas: Quotas) -> Self {
        Self {
            clock,
            quotas,
            started: AtomicBool::new(false),
            next_revision: AtomicU64::new(1),
            data: RwLock::new(Users::default()),
        }
    }

    fn check_started(&self) -> Result<()> {
        if self.started.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(MemoryError::not_started(PROVIDER))
        }
    }

    fn read(&self) -> Result<RwLockReadGuard<'_, Users>> {
        self.check_started()?;
        // No code path panics while holding the lock, so a poisoned lock still holds
        // consistent data.
        Ok(self.data.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn write(&self) -> Result<RwLockWriteGuard<'_, Users>> {
        self.check_started()?;
        Ok(self.data.write().unwrap_or_else(PoisonError::into_inner))
    }

    fn new_revision(&self) -> Revision {
        let n = self.next_revision.fetch_add(1, Ordering::Relaxed);
        Revision::from_counter(n, 16)
    }
}

fn namespace<'a>(users: &'a Users, scope: &MemoryScope) -> Option<&'a Keys> {
    users.get(&UserIds::of(scope))?.namespaces.get(scope.namespace_or_empty())
}

/// Removes the namespaces left empty, and the user's entry once none is left, so nothing
/// names an erased user.
fn prune(users: &mut Users, ids: &UserIds<'_>) {
    if let Some(held) = users.get_mut(ids) {
        held.namespaces.retain(|_, keys| !keys.is_empty());
        if held.namespaces.is_empty() {
            users.remove(ids);
        }
    }
}

/// Keys of one namespace strictly after `after`, in byte order.
/// The bounded scan behind `search` and a filtered `list`: the page's keys in order, at most
/// [`SEARCH_SCAN_LIMIT`] of them and [`DEFAULT_SEARCH_SCAN_BYTES`] of content per call,
/// keeping the live records whose metadata passes the page's filter and that `keep` accepts.
fn scan_page<'a>(
    rows: impl Iterator<Item = (&'a String, &'a Stored)>,
    scope: &MemoryScope,
    page: &KeyPage,
    now: Timestamp,
    keep: impl Fn(&Stored) -> bool,
) -> MemoryPage {
    let mut scan = SearchScan::new(SEARCH_SCAN_LIMIT, DEFAULT_SEARCH_SCAN_BYTES);
    let mut items: Vec<MemoryRecord> = Vec::with_capacity(page.limit.min(128));
    let mut last_inspected: Option<&String> = None;
    for (key, stored) in rows {
        if !scan.has_room() {
            // The budget ran out before this key: continue after the last one inspected.
            let next_cursor = last_inspected.map(|last| page.cursor(scope, last));
            return MemoryPage { items, next_cursor };
        }
        scan.inspect(stored.content.len());
        last_inspected = Some(key);
        if stored.is_live(now) && page.metadata.matches(&stored.metadata) && keep(stored) {
            if items.len() == page.limit {
                // Another match follows a full page.
                let next_cursor = items.last().map(|last| page.cursor(scope, &last.key));
                return MemoryPage { items, next_cursor };
            }
            items.push(stored.to_record(scope, key));
        }
    }
    MemoryPage { items, next_cursor: None }
}

fn keys_after<'a>(
    keys: &'a Keys,
    after: Option<&str>,
) -> impl Iterator<Item = (&'a String, &'a Stored)> {
    use std::ops::Bound::{Excluded, Unbounded};
    let start = match after {
        Some(key) => Excluded(key),
        None => Unbounded,
    };
    keys.range::<str, _>((start, Unbounded))
}

/// Keys of one namespace in the range `page` asks for (after its cursor, else from its prefix,
/// up to the prefix's end), in byte order: one `BTreeMap::range`, never a filtered scan.
fn keys_in_page<'a>(
    keys: &'a Keys,
    page: &KeyPage,
) -> impl Iterator<Item = (&'a String, &'a Stored)> {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let end = page.prefix_end();
    let start = match &page.after {
        Some(key) => Excluded(key.as_str()),
        None => Included(page.prefix.as_str()),
    };
    // `range` panics on a start past the end, which a forged cursor can ask for: that range
    // holds no key.
    let empty = match (&page.after, &end) {
        (Some(after), Some(end)) => after >= end,
        _ => false,
    };
    let end = match &end {
        Some(end) => Excluded(end.as_str()),
        None => Unbounded,
    };
    (!empty).then(|| keys.range::<str, _>((start, end))).into_iter().flatten()
}

impl crate::observe::Telemetry for InMemoryStore {
    fn system(&self) -> &'static str {
        "memory"
    }
}

impl crate::observe::Backend for InMemoryStore {
    async fn start(&self) -> Result<()> {
        self.started.store(true, Ordering::Release);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        let now = self.clock.now();
        write.validate(key, now)?;
        let ids = UserIds::of(scope);
        let ns = scope.namespace_or_empty();
        let mut users = self.write()?;
        let held = users.ensure(&ids);
        let (namespaces, usage) = (&mut held.namespaces, &mut held.usage);
        // Look up before inserting, so writing to an existing namespace allocates no name.
        if !namespaces.contains_key(ns) {
            namespaces.insert(ns.to_owned(), Keys::new());
        }
        let keys = namespaces.get_mut(ns).expect("the namespace was just ensured");
        let held_before = keys.get(key).map(|stored| stored.bytes);
        let live = keys.get(key).filter(|stored| stored.is_live(now));
        let parts = WriteParts::from(write);
        let bytes = quota::record_bytes(key, &parts.content, &parts.metadata, &parts.source);
        let change = UsageChange::of_write(held_before, bytes);
        let allowed = match &parts.condition {
            WriteCondition::Always => Ok(()),
            WriteCondition::CreateOnly if live.is_some() => Err(MemoryError::already_exists()),
            WriteCondition::CreateOnly => Ok(()),
            WriteCondition::Revision(expected) if live.is_some_and(|s| &s.revision == expected) => {
                Ok(())
            }
            WriteCondition::Revision(_) => Err(MemoryError::stale_revision()),
        }
        .and_then(|()| self.quotas.admit(*usage, change));
        if let Err(conflict) = allowed {
            prune(&mut users, &ids);
            return Err(conflict);
        }
        let created_at = live.map_or(now, |stored| stored.created_at);
        let stored = Stored {
            content: parts.content,
            metadata: parts.metadata,
            revision: self.new_revision(),
            created_at,
            updated_at: now,
            expires_at: parts.expires_at,
            source: parts.source,
            bytes,
        };
        let record = stored.to_record(scope, key);
        usage.records = usage.records.saturating_add_signed(change.records);
        usage.bytes = usage.bytes.saturating_add_signed(change.bytes);
        match keys.get_mut(key) {
            Some(slot) => *slot = stored,
            None => {
                keys.insert(key.to_owned(), stored);
            }
        }
        Ok(record)
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let users = self.read()?;
        let Some(stored) = namespace(&users, scope).and_then(|keys| keys.get(key)) else {
            return Ok(None);
        };
        // Most records never expire; only those that do need the clock.
        let live = stored.expires_at.is_none_or(|_| stored.is_live(self.clock.now()));
        Ok(live.then(|| stored.to_record(scope, key)))
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::List, scope)?;
        if !page.metadata.is_empty() {
            return self.scan(scope, &page, |_| true);
        }
        let now = self.clock.now();
        let users = self.read()?;
        let live = namespace(&users, scope)
            .into_iter()
            .flat_map(|keys| keys_in_page(keys, &page))
            .filter(|(_, s)| s.is_live(now));
        PageBuilder::for_page(scope, &page)
            .fill(live, |(key, stored)| Ok(stored.to_record(scope, key)))
    }

    async fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> Result<KeyInfoPage> {
        let page = page.key_page(CursorKind::Keys, scope)?;
        let now = self.clock.now();
        let users = self.read()?;
        let live = namespace(&users, scope)
            .into_iter()
            .flat_map(|keys| keys_in_page(keys, &page))
            .filter(|(_, s)| s.is_live(now))
            .map(|(key, stored)| {
                KeyInfo::new(key.as_str(), u64::try_from(stored.content.len()).unwrap_or(u64::MAX))
            });
        Ok(key_info_page(scope, &page, live))
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        let page = page.key_page(CursorKind::Search, scope)?;
        let matcher = page.matcher(query)?;
        self.scan(scope, &page, |stored| matcher.matches(&stored.content))
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        validation::key(key)?;
        let now = self.clock.now();
        let mut users = self.write()?;
        let Some(Held { namespaces, usage }) = users.get_mut(&UserIds::of(scope)) else {
            return match expected_revision {
                Some(_) => Err(MemoryError::stale_revision()),
                None => Ok(false),
            };
        };
        let Some(keys) = namespaces.get_mut(scope.namespace_or_empty()) else {
            return match expected_revision {
                Some(_) => Err(MemoryError::stale_revision()),
                None => Ok(false),
            };
        };
        let live_revision = keys.get(key).filter(|s| s.is_live(now)).map(|s| &s.revision);
        if let Some(expected) = expected_revision {
            if live_revision != Some(expected) {
                return Err(MemoryError::stale_revision());
            }
        }
        let existed = live_revision.is_some();
        if let Some(stored) = keys.remove(key) {
            usage.release(&stored);
        }
        if keys.is_empty() {
            prune(&mut users, &UserIds::of(scope));
        }
        Ok(existed)
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let ids = UserIds::of(scope);
        let mut users = self.write()?;
        let removed = users.get_mut(&ids).map_or(0, |held| {
            let keys = held.namespaces.remove(scope.namespace_or_empty()).unwrap_or_default();
            keys.values().for_each(|stored| held.usage.release(stored));
            keys.len()
        });
        prune(&mut users, &ids);
        Ok(removed as u64)
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let mut users = self.write()?;
        let removed = users
            .remove(&UserIds { application_id, user_id })
            .map_or(0, |held| held.namespaces.values().map(BTreeMap::len).sum::<usize>());
        Ok(removed as u64)
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        let page = page.namespace_page(application_id, user_id)?;
        let users = self.read()?;
        let Some(namespaces) =
            users.get(&UserIds { application_id, user_id }).map(|h| &h.namespaces)
        else {
            return Ok(NamespacePage { items: Vec::new(), next_cursor: None });
        };
        use std::ops::Bound::{Excluded, Unbounded};
        let start = match page.after.as_deref() {
            Some(ns) => Excluded(ns),
            None => Unbounded,
        };
        let names = namespaces
            .range::<str, _>((start, Unbounded))
            .filter(|(_, keys)| !keys.is_empty())
            .map(|(name, _)| name.clone())
            .take(page.limit + 1);
        provider::namespace_page(PROVIDER, application_id, user_id, page.limit, names)
    }

    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage> {
        let page = page.user_page(application_id)?;
        let users = self.read()?;
        let Some(ids) = users.by_application.get(application_id) else {
            return Ok(UserPage { items: Vec::new(), next_cursor: None });
        };
        use std::ops::Bound::{Excluded, Unbounded};
        let start = match page.after.as_deref() {
            Some(user) => Excluded(user),
            None => Unbounded,
        };
        let ids =
            ids.range::<str, _>((start, Unbounded)).map(|id| id.to_string()).take(page.limit + 1);
        provider::user_page(PROVIDER, application_id, page.limit, ids)
    }

    async fn list_applications(&self, page: PageRequest) -> Result<ApplicationPage> {
        let page = page.application_page()?;
        let users = self.read()?;
        use std::ops::Bound::{Excluded, Unbounded};
        let start = match page.after.as_deref() {
            Some(app) => Excluded(app),
            None => Unbounded,
        };
        let ids = users
            .by_application
            .range::<str, _>((start, Unbounded))
            .map(|(id, _)| id.to_string())
            .take(page.limit + 1);
        provider::application_page(PROVIDER, page.limit, ids)
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let page = page.key_page(CursorKind::Purge, scope)?;
        let now = self.clock.now();
        let mut users = self.write()?;
        let Some(Held { namespaces, usage }) = users.get_mut(&UserIds::of(scope)) else {
            return Ok(MemoryCleanupPage { deleted: 0, next_cursor: None });
        };
        let Some(keys) = namespaces.get_mut(scope.namespace_or_empty()) else {
            return Ok(MemoryCleanupPage { deleted: 0, next_cursor: None });
        };
        let (batch, more) = {
            let mut inspected = keys_after(keys, page.after.as_deref());
            let batch: Vec<(String, bool)> = inspected
                .by_ref()
                .take(page.limit)
                .map(|(key, stored)| (key.clone(), !stored.is_live(now)))
                .collect();
            (batch, inspected.next().is_some())
        };
        let mut deleted = 0;
        for (key, expired) in &batch {
            if *expired {
                if let Some(stored) = keys.remove(key) {
                    usage.release(&stored);
                }
                deleted += 1;
            }
        }
        prune(&mut users, &UserIds::of(scope));
        let next_cursor = more.then(|| {
            let last = &batch.last().expect("more keys follow a non-empty batch").0;
            key_cursor(CursorKind::Purge, scope, last)
        });
        Ok(MemoryCleanupPage { deleted, next_cursor })
    }
}
