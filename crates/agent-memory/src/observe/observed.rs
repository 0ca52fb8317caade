//! [`Observed`]: the built-in providers' spans and metrics around any store.

use super::backend::{Backend, Telemetry};
use crate::error::Result;
use crate::page::{
    ApplicationPage, KeyInfoPage, MemoryCleanupPage, MemoryPage, NamespacePage, PageRequest,
    UserPage,
};
use crate::record::{MemoryRecord, Revision};
use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::write::MemoryWrite;

/// A store whose every operation is one span and one set of measurements, exactly as the
/// built-in providers' are (see [the module docs](super)), with `db.system.name` set to the name
/// it was given. For a provider written outside this crate, a Python-written store included:
/// wrap it once where it is built and hand out the wrapper.
///
/// With no subscriber and no metrics recorder, an operation pays the same two checks as a
/// built-in provider's before it runs the inner store's.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use agent_memory::observe::Observed;
/// use agent_memory::{InMemoryStore, MemoryScope, MemoryStore, MemoryWrite};
///
/// // Any `MemoryStore` will do; a third-party one names its own system.
/// let store = Observed::new("my-datastore", InMemoryStore::new());
/// store.start().await?;
/// let scope = MemoryScope::new("app", "user-1")?;
/// store.put(&scope, "k", MemoryWrite::new("v")).await?;
/// assert_eq!(store.system(), "my-datastore");
/// assert!(store.inner().get(&scope, "k").await?.is_some());
/// # Ok::<(), agent_memory::MemoryError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Observed<S> {
    system: &'static str,
    inner: S,
}

impl<S: MemoryStore> Observed<S> {
    /// `inner`, observed with `db.system.name` = `system`. The name is a metric label: a fixed
    /// word naming the datastore, never anything a caller sent.
    pub fn new(system: &'static str, inner: S) -> Self {
        Self { system, inner }
    }

    /// The `db.system.name` its spans and metrics carry.
    pub fn system(&self) -> &'static str {
        self.system
    }

    /// The store inside, whose operations are not observed.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The store inside.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: MemoryStore> Telemetry for Observed<S> {
    fn system(&self) -> &'static str {
        self.system
    }
}

impl<S: MemoryStore> Backend for Observed<S> {
    async fn start(&self) -> Result<()> {
        self.inner.start().await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }

    async fn put(
        &self,
        scope: &MemoryScope,
        key: &str,
        write: MemoryWrite,
    ) -> Result<MemoryRecord> {
        self.inner.put(scope, key, write).await
    }

    async fn get(&self, scope: &MemoryScope, key: &str) -> Result<Option<MemoryRecord>> {
        self.inner.get(scope, key).await
    }

    async fn list(&self, scope: &MemoryScope, page: PageRequest) -> Result<MemoryPage> {
        self.inner.list(scope, page).await
    }

    async fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> Result<KeyInfoPage> {
        self.inner.list_keys(scope, page).await
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        query: &str,
        page: PageRequest,
    ) -> Result<MemoryPage> {
        self.inner.search(scope, query, page).await
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        key: &str,
        expected_revision: Option<&Revision>,
    ) -> Result<bool> {
        self.inner.delete(scope, key, expected_revision).await
    }

    async fn delete_all(&self, scope: &MemoryScope) -> Result<u64> {
        self.inner.delete_all(scope).await
    }

    async fn delete_user(&self, application_id: &str, user_id: &str) -> Result<u64> {
        self.inner.delete_user(application_id, user_id).await
    }

    async fn list_namespaces(
        &self,
        application_id: &str,
        user_id: &str,
        page: PageRequest,
    ) -> Result<NamespacePage> {
        self.inner.list_namespaces(application_id, user_id, page).await
    }

    async fn list_users(&self, application_id: &str, page: PageRequest) -> Result<UserPage> {
        self.inner.list_users(application_id, page).await
    }

    async fn list_applications(&self, page: PageRequest) -> Result<ApplicationPage> {
        self.inner.list_applications(page).await
    }

    async fn purge_expired(
        &self,
        scope: &MemoryScope,
        page: PageRequest,
    ) -> Result<MemoryCleanupPage> {
        self.inner.purge_expired(scope, page).await
    }
}
