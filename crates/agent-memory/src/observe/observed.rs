//! [`Observed`]: the built-in providers' spans and metrics around any store.

use super::backend::{Backend, Telemetry};
use crate::error::Result;
use crate::store::MemoryStore;

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
    }

    crate::store_operations!(forward);
}
