//! [`InMemoryStore`], the process-local provider for tests and single-process programs.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{MemoryError, Result};
use crate::page::{Cursor, CursorKind, MemoryCleanupPage, MemoryPage, NamespacePage, PageRequest};
use crate::record::{MemoryRecord, Metadata, Revision, Source};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::time::{Clock, SystemClock, Timestamp};
use crate::validation;
use crate::write::{MemoryWrite, WriteCondition};

const PROVIDER: &str = "memory";

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
    started: AtomicBool,
    next_revision: AtomicU64,
    data: RwLock<Apps>,
}

/// application id → user id → namespace ("" for the default) → key → record.
type Apps = HashMap<String, HashMap<String, BTreeMap<String, BTreeMap<String, Stored>>>>;

#[derive(Debug, Clone)]
struct Stored {
    content: String,
    metadata: Metadata,
    revision: Revision,
    created_at: Timestamp,
    updated_at: Timestamp,
    expires_at: Option<Timestamp>,
    source: Source,
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
    /// An empty store on the system clock. Call [`start`](MemoryStore::start) before use.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty store reading time from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            started: AtomicBool::new(false),
            next_revision: AtomicU64::new(1),
            data: RwLock::new(HashMap::new()),
        }
    }

    fn check_started(&self) -> Result<()> {
        if self.started.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(MemoryError::not_started(PROVIDER))
        }
    }

    fn read(&self) -> Result<RwLockReadGuard<'_, Apps>> {
        self.check_started()?;
        // No code path panics while holding the lock, so a poisoned lock still holds
        // consistent data.
        Ok(self.data.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn write(&self) -> Result<RwLockWriteGuard<'_, Apps>> {
        self.check_started()?;
        Ok(self.data.write().unwrap_or_else(PoisonError::into_inner))
    }

    fn new_revision(&self) -> Revision {
        let n = self.next_revision.fetch_add(1, Ordering::Relaxed);
        Revision::new(format!("{n:x}")).expect("hex digits are a valid revision")
    }
}

fn namespace<'a>(apps: &'a Apps, scope: &MemoryScope) -> Option<&'a BTreeMap<String, Stored>> {
    apps.get(scope.application_id())?.get(scope.user_id())?.get(scope.namespace_or_empty())
}

/// Removes the user and application entries left empty, so nothing names an erased user.
fn prune(apps: &mut Apps, scope: &MemoryScope) {
    if let Some(users) = apps.get_mut(scope.application_id()) {
        if let Some(namespaces) = users.get_mut(scope.user_id()) {
            namespaces.retain(|_, keys| !keys.is_empty());
            if namespaces.is_empty() {
                users.remove(scope.user_id());
            }
        }
        if users.is_empty() {
            apps.remove(scope.application_id());
        }
    }
}

/// Keys of one namespace strictly after `after`, in byte order.
fn keys_after<'a>(
    keys: &'a BTreeMap<String, Stored>,
    after: Option<&str>,
) -> impl Iterator<Item = (&'a String, &'a Stored)> {
    use std::ops::Bound::{Excluded, Unbounded};
    let start = match after {
        Some(key) => Excluded(key),
        None => Unbounded,
    };
    keys.range::<str, _>((start, Unbounded))
}

/// The first `limit` of `records` as a page, with a cursor when more follow.
fn page_of<'a>(
    kind: CursorKind,
    scope: &MemoryScope,
    limit: usize,
    mut records: impl Iterator<Item = (&'a String, &'a Stored)>,
) -> MemoryPage {
    let items: Vec<MemoryRecord> =
        records.by_ref().take(limit).map(|(key, stored)| stored.to_record(scope, key)).collect();
    let next_cursor = match (records.next(), items.last()) {
        (Some(_), Some(last)) => Some(Cursor::for_scope(kind, scope, &last.key)),
        _ => None,
    };
    MemoryPage { items, next_cursor }
}

#[async_trait::async_trait]
impl MemoryStore for InMemoryStore {
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
        validation::put(key, &write, now)?;
        let mut apps = self.write()?;
        let keys = apps
            .entry(scope.application_id().to_owned())
            .or_default()
            .entry(scope.user_id().to_owned())
            .or_default()
            .entry(scope.namespace_or_empty().to_owned())
            .or_default();
        let live = keys.get(key).filter(|stored| stored.is_live(now));
        let allowed = match write.condition() {
            WriteCondition::Always => Ok(()),
            WriteCondition::CreateOnly if live.is_some() => Err(MemoryError::already_exists()),
            WriteCondition::CreateOnly => Ok(()),
            WriteCondition::Revision(expected) if live.is_some_and(|s| &s.revision == expected) => {
                Ok(())
            }
            WriteCondition::Revision(_) => Err(MemoryError::stale_revision()),
        };
        if let Err(conflict) = allowed {
            prune(&mut apps, scope);
            return Err(conflict);
        }
        let created_at = live.map_or(now, |stored| stored.created_at);
        let parts = write.into_parts();
        let stored = Stored {
            content: parts.content,
            metadata: parts.metadata,
            revision: self.new_revision(),
            created_at,
            updated_at: now,
            expires_at: parts.expires_at,
            source: parts.source,
        };
        let record = stored.to_record(scope, key);
        keys.insert(key.to_owned(), stored);
        Ok(record)
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        validation::key(key)?;
        let now = self.clock.now();
        let apps = self.read()?;
        Ok(namespace(&apps, scope)
            .and_then(|keys| keys.get(key))
            .filter(|stored| stored.is_live(now))
            .map(|stored| stored.to_record(scope, key)))
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        let (limit, after) = validation::key_page(CursorKind::List, scope, &page)?;
        let now = self.clock.now();
        let apps = self.read()?;
        let live = namespace(&apps, scope)
            .into_iter()
            .flat_map(|keys| keys_after(keys, after.as_deref()))
            .filter(|(_, s)| s.is_live(now));
        Ok(page_of(CursorKind::List, scope, limit, live))
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        validation::query(query)?;
        let (limit, after) = validation::key_page(CursorKind::Search, scope, &page)?;
        let now = self.clock.now();
        let apps = self.read()?;
        let matches = namespace(&apps, scope)
            .into_iter()
            .flat_map(|keys| keys_after(keys, after.as_deref()))
            .filter(|(_, s)| s.is_live(now) && s.content.contains(query));
        Ok(page_of(CursorKind::Search, scope, limit, matches))
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        validation::key(key)?;
        let now = self.clock.now();
        let mut apps = self.write()?;
        let Some(keys) = apps
            .get_mut(scope.application_id())
            .and_then(|users| users.get_mut(scope.user_id()))
            .and_then(|namespaces| namespaces.get_mut(scope.namespace_or_empty()))
        else {
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
        keys.remove(key);
        prune(&mut apps, scope);
        Ok(existed)
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        let mut apps = self.write()?;
        let removed = apps
            .get_mut(scope.application_id())
            .and_then(|users| users.get_mut(scope.user_id()))
            .and_then(|namespaces| namespaces.remove(scope.namespace_or_empty()))
            .map_or(0, |keys| keys.len());
        prune(&mut apps, scope);
        Ok(removed as u64)
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        validation::user(application_id, user_id)?;
        let scope = MemoryScope::new(application_id, user_id)?;
        let mut apps = self.write()?;
        let removed = apps
            .get_mut(application_id)
            .and_then(|users| users.remove(user_id))
            .map_or(0, |namespaces| namespaces.values().map(BTreeMap::len).sum::<usize>());
        prune(&mut apps, &scope);
        Ok(removed as u64)
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        let (limit, after) = validation::namespace_page(application_id, user_id, &page)?;
        let base = MemoryScope::new(application_id, user_id)?;
        let apps = self.read()?;
        let Some(namespaces) = apps.get(application_id).and_then(|users| users.get(user_id)) else {
            return Ok(NamespacePage { items: Vec::new(), next_cursor: None });
        };
        use std::ops::Bound::{Excluded, Unbounded};
        let start = match after.as_deref() {
            Some(ns) => Excluded(ns),
            None => Unbounded,
        };
        let mut names = namespaces
            .range::<str, _>((start, Unbounded))
            .filter(|(_, keys)| !keys.is_empty())
            .map(|(name, _)| name.as_str());
        let page_names: Vec<&str> = names.by_ref().take(limit).collect();
        let more = names.next().is_some();
        let items = page_names
            .iter()
            .map(|&name| match name {
                "" => Ok(base.clone()),
                named => base.with_namespace(named),
            })
            .collect::<Result<Vec<_>>>()?;
        let next_cursor = more.then(|| {
            Cursor::for_user(application_id, user_id, page_names.last().copied().unwrap_or(""))
        });
        Ok(NamespacePage { items, next_cursor })
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        let (limit, after) = validation::key_page(CursorKind::Purge, scope, &page)?;
        let now = self.clock.now();
        let mut apps = self.write()?;
        let Some(keys) = apps
            .get_mut(scope.application_id())
            .and_then(|users| users.get_mut(scope.user_id()))
            .and_then(|namespaces| namespaces.get_mut(scope.namespace_or_empty()))
        else {
            return Ok(MemoryCleanupPage { deleted: 0, next_cursor: None });
        };
        let (batch, more) = {
            let mut inspected = keys_after(keys, after.as_deref());
            let batch: Vec<(String, bool)> = inspected
                .by_ref()
                .take(limit)
                .map(|(key, stored)| (key.clone(), !stored.is_live(now)))
                .collect();
            (batch, inspected.next().is_some())
        };
        let mut deleted = 0;
        for (key, expired) in &batch {
            if *expired {
                keys.remove(key);
                deleted += 1;
            }
        }
        prune(&mut apps, scope);
        let next_cursor = more.then(|| {
            let last = &batch.last().expect("more keys follow a non-empty batch").0;
            Cursor::for_scope(CursorKind::Purge, scope, last)
        });
        Ok(MemoryCleanupPage { deleted, next_cursor })
    }
}
