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
/// it was given. For a provider written outside this crate: wrap it once where it is built and
/// hand out the wrapper.
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

    /// The store inside; calls through it skip this wrapper's spans and metrics.
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

/// Each listed operation of [`Backend`], run by the inner store's [`MemoryStore`] method of
/// the same name and arguments.
macro_rules! forward {
    ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)*) => {
        $(
            async fn $name(&self $(, $arg: $ty)*) -> Result<$out> {
                self.inner.$name($($arg),*).await
            }
        )*
    };
}

impl<S: MemoryStore> Backend for Observed<S> {
    forward! {
        fn start(&self) -> ();
        fn close(&self) -> ();
        fn put(&self, scope: &MemoryScope, key: &str, write: MemoryWrite) -> MemoryRecord;
        fn get(&self, scope: &MemoryScope, key: &str) -> Option<MemoryRecord>;
        fn list(&self, scope: &MemoryScope, page: PageRequest) -> MemoryPage;
        fn list_keys(&self, scope: &MemoryScope, page: PageRequest) -> KeyInfoPage;
        fn search(&self, scope: &MemoryScope, query: &str, page: PageRequest) -> MemoryPage;
        fn delete(&self, scope: &MemoryScope, key: &str, expected: Option<&Revision>) -> bool;
        fn delete_all(&self, scope: &MemoryScope) -> u64;
        fn delete_user(&self, application_id: &str, user_id: &str) -> u64;
        fn list_namespaces(&self, application_id: &str, user_id: &str, page: PageRequest)
            -> NamespacePage;
        fn list_users(&self, application_id: &str, page: PageRequest) -> UserPage;
        fn list_applications(&self, page: PageRequest) -> ApplicationPage;
        fn purge_expired(&self, scope: &MemoryScope, page: PageRequest) -> MemoryCleanupPage;
    }
}
