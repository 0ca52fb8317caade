//! [`Fixture`]: what a provider's factory hands the suite (the store under test, and how to
//! build more instances of it), and [`Bounds`].

use std::any::Any;
use std::sync::Arc;

use crate::quota::Quotas;
use crate::store::MemoryStore;
use crate::time::{Clock, ManualClock};

/// The store under test, as a factory builds it.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub(super) store: Arc<dyn MemoryStore>,
    pub(super) replica: Option<Arc<dyn MemoryStore>>,
    pub(super) clock: Option<ManualClock>,
    pub(super) quotas: Option<Factory<Quotas>>,
    pub(super) bounds: Option<Factory<Bounds>>,
    pub(super) guards: Guards,
}

/// Builds an unstarted instance with options `T` on the fixture's datastore.
pub(super) struct Factory<T>(Arc<dyn Fn(T) -> Arc<dyn MemoryStore> + Send + Sync>);

impl<T> Factory<T> {
    /// A started instance with `options`, of which `what` speaks in failures.
    pub(super) async fn started(&self, options: T, what: &str) -> Arc<dyn MemoryStore> {
        let store = (self.0)(options);
        store.start().await.unwrap_or_else(|e| panic!("the store with {what} starts: {e:?}"));
        store
    }
}

impl<T> Clone for Factory<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> std::fmt::Debug for Factory<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Factory<{}>", std::any::type_name::<T>())
    }
}

/// Scan and batch bounds for [`Fixture::with_bounds`]; each `None` keeps the provider's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Bounds {
    /// The most keys one `search` call (or `list` call with a metadata filter) inspects.
    pub search_scan_limit: Option<usize>,
    /// The most content bytes one `search` call (or `list` call with a metadata filter) reads.
    pub search_scan_bytes: Option<usize>,
    /// The most records one batch of `delete_all` or `delete_user` removes.
    pub erase_batch_size: Option<usize>,
}

/// Values kept alive for a case; shared, so every clone of a fixture or harness keeps them.
pub(super) type Guards = Vec<Arc<dyn Any + Send + Sync>>;

impl Fixture {
    /// An unstarted store whose clock is the datastore's (or the system's).
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store, replica: None, clock: None, quotas: None, bounds: None, guards: Vec::new() }
    }

    /// A store that keeps its records inside the instance, as the in-memory provider does, on
    /// a new [`ManualClock`]: `open` builds an unstarted instance reading time from the given
    /// clock and holding each application user to the given [`Quotas`]. It is called once with
    /// [`Quotas::unlimited`] for the store the cases use, and once per quota case, each call a
    /// datastore of its own on the same clock. There is no replica, so the replica cases race
    /// tasks of the one instance.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_memory::conformance::Fixture;
    /// # use agent_memory::InMemoryStore;
    /// async fn store() -> Fixture {
    ///     Fixture::in_process(|clock, quotas| {
    ///         let builder = InMemoryStore::builder().clock(clock).quotas(quotas);
    ///         Arc::new(builder.build().expect("valid quotas"))
    ///     })
    /// }
    /// ```
    pub fn in_process(
        open: impl Fn(Arc<dyn Clock>, Quotas) -> Arc<dyn MemoryStore> + Send + Sync + 'static,
    ) -> Self {
        let clock = ManualClock::starting_now();
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let store = open(Arc::clone(&shared), Quotas::unlimited());
        Self::new(store)
            .with_clock(clock)
            .with_quotas(move |quotas| open(Arc::clone(&shared), quotas))
    }

    /// Keeps `guard` alive until the case has ended and the store (and its replica) are
    /// closed, then drops it: what the store lives in and must outlive it, such as the
    /// temporary directory holding its file, or a server started for this case.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use agent_memory::conformance::Fixture;
    /// # struct MyFileStore;
    /// # impl MyFileStore {
    /// #     fn new(_: std::path::PathBuf) -> agent_memory::InMemoryStore { Default::default() }
    /// # }
    /// async fn store() -> Fixture {
    ///     let dir = tempfile::tempdir().unwrap();
    ///     let store = MyFileStore::new(dir.path().join("memories.db"));
    ///     Fixture::new(Arc::new(store)).with_guard(dir)
    /// }
    /// ```
    ///
    /// Call it more than once to keep several values; they are dropped together.
    pub fn with_guard(mut self, guard: impl Any + Send + Sync) -> Self {
        self.guards.push(Arc::new(guard));
        self
    }

    crate::builder::setters! {
        /// Declares that `store` reads time from `clock`, so cases can move it.
        with_clock(clock: ManualClock) => clock = Some(clock);

        /// Declares how to build another unstarted instance on the same datastore (the same
        /// database, Redis or file, and the same clock) with the given [`Quotas`], for the quota
        /// cases. Each call of `open` must give a new instance; the cases start and close it.
        with_quotas(open: impl Fn(Quotas) -> Arc<dyn MemoryStore> + Send + Sync + 'static)
            => quotas = Some(Factory(Arc::new(open)));

        /// Declares how to build another unstarted instance on the same datastore (and clock)
        /// with the given scan and batch [`Bounds`], for the bounds cases. Each call of `open`
        /// must give a new instance; the cases start and close it.
        with_bounds(open: impl Fn(Bounds) -> Arc<dyn MemoryStore> + Send + Sync + 'static)
            => bounds = Some(Factory(Arc::new(open)));
    }

    /// Adds a second, independent, unstarted store instance on the same datastore: what a
    /// second replica of an application would build (its own pool, connections or file handle,
    /// the same database, Redis or file). The replica cases race the two instances against each
    /// other; the harness starts and closes it alongside the store.
    ///
    /// Without it, [`Harness::replica`](super::Harness::replica) is the store itself. That is the
    /// honest default for a provider that cannot have two instances on one datastore (the in-memory
    /// provider keeps its data inside the instance), and it still runs every replica case, as a
    /// race between tasks of one instance. A provider that can have replicas should pass one here,
    /// so the cases prove that the conditional checks live in the datastore and not in the
    /// instance.
    pub fn with_replica(mut self, store: Arc<dyn MemoryStore>) -> Self {
        self.replica = Some(store);
        self
    }
}
