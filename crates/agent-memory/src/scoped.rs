//! [`ScopedMemory`], a store bound to one scope and source, for agent code.

use std::sync::Arc;

use crate::error::Result;
use crate::page::{KeyInfoPage, MemoryPage, PageRequest};
use crate::record::{MemoryRecord, Revision, Source};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

/// A store bound to one [`MemoryScope`] and one [`Source`]: what agent code and model tools get.
///
/// It offers the everyday operations only; maintenance (`delete_all`, `delete_user`,
/// `purge_expired`) stays on the [`MemoryStore`] in trusted code.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use agent_memory::{InMemoryStore, MemoryScope, MemoryStore, PageRequest, ScopedMemory, Source};
///
/// let store = Arc::new(InMemoryStore::new());
/// store.start().await?;
/// let scope = MemoryScope::new("support-bot", "user-42")?;
/// let memory = ScopedMemory::new(store, scope).with_source(Source::default().session("s-1"));
///
/// memory.put("report-format", "Start with an executive summary.").await?;
/// let prefs = memory.namespace("preferences")?;
/// prefs.put("units", "metric").await?;
///
/// let hits = memory.search("executive", PageRequest::default()).await?;
/// assert_eq!(hits.items[0].key, "report-format");
/// assert_eq!(hits.items[0].source.session_id.as_deref(), Some("s-1"));
/// assert!(memory.get("units").await?.is_none()); // another namespace
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ScopedMemory {
    store: Arc<dyn MemoryStore>,
    scope: MemoryScope,
    source: Source,
}

impl ScopedMemory {
    /// Binds `store` to `scope`, with an empty source.
    pub fn new(store: Arc<dyn MemoryStore>, scope: MemoryScope) -> Self {
        Self { store, scope, source: Source::default() }
    }

    /// The same handle recording `source` on every write that does not carry its own.
    pub fn with_source(mut self, source: Source) -> Self {
        self.source = source;
        self
    }

    /// A sibling handle for another namespace of the same user, with the same source.
    ///
    /// # Errors
    /// [`Invalid`](crate::MemoryError::Invalid) for a bad namespace name.
    pub fn namespace(&self, name: impl Into<String>) -> Result<Self> {
        Ok(Self {
            store: Arc::clone(&self.store),
            scope: self.scope.with_namespace(name)?,
            source: self.source.clone(),
        })
    }

    /// The bound scope.
    pub fn scope(&self) -> &MemoryScope {
        &self.scope
    }

    /// The bound source.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Inserts or replaces `key`; see [`MemoryStore::put`]. A plain string is an unconditional
    /// write of that content.
    pub async fn put(&self, key: &str, write: impl Into<MemoryWrite>) -> Result<MemoryRecord> {
        let mut write = write.into();
        if write.source_ref().is_empty() {
            write = write.source(self.source.clone());
        }
        self.store.put(&self.scope, key, write).await
    }

    /// Reads the live record at `key`; see [`MemoryStore::get`].
    pub async fn get(&self, key: &str) -> Result<Option<MemoryRecord>> {
        self.store.get(&self.scope, key).await
    }

    /// Pages live records in key order; see [`MemoryStore::list`].
    pub async fn list(&self, page: PageRequest) -> Result<MemoryPage> {
        self.store.list(&self.scope, page).await
    }

    /// Pages live keys with their content's size, without reading contents; see
    /// [`MemoryStore::list_keys`].
    pub async fn list_keys(&self, page: PageRequest) -> Result<KeyInfoPage> {
        self.store.list_keys(&self.scope, page).await
    }

    /// Pages literal, case-sensitive content matches; see [`MemoryStore::search`].
    pub async fn search(&self, query: &str, page: PageRequest) -> Result<MemoryPage> {
        self.store.search(&self.scope, query, page).await
    }

    /// Removes `key`, optionally only at `expected_revision`; see [`MemoryStore::delete`].
    pub async fn delete(&self, key: &str, expected_revision: Option<&Revision>) -> Result<bool> {
        self.store.delete(&self.scope, key, expected_revision).await
    }
}
