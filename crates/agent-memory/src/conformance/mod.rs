//! The behaviour suite every provider runs, as public code (feature `conformance`).
//!
//! Each case is a `pub async fn(Harness)` in [`cases`], checking one line of the contract. Each
//! runs under a fresh random application id, so many cases (and many runs) can share one
//! database without seeing each other. [`conformance_tests!`](crate::conformance_tests) stamps
//! one `#[test]` per case for a store factory:
//!
//! ```ignore
//! use std::sync::Arc;
//! use agent_memory::conformance::Fixture;
//!
//! async fn store() -> Fixture {
//!     Fixture::new(Arc::new(MyStore::connect(std::env::var("MY_URL").unwrap())))
//! }
//!
//! agent_memory::conformance_tests!(store);
//! ```
//!
//! The factory returns an unstarted store; the harness starts it, runs the case, and closes
//! it. Providers whose clock can be injected pass a [`ManualClock`] with
//! [`Fixture::with_clock`] so expiry cases move time instead of sleeping; the others sleep
//! briefly, and the datastore's own clock decides.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::scope::MemoryScope;
use crate::store::MemoryStore;
use crate::time::{Clock, ManualClock, Timestamp};

/// The store under test, as a factory builds it.
#[derive(Debug, Clone)]
pub struct Fixture {
    store: Arc<dyn MemoryStore>,
    clock: Option<ManualClock>,
}

impl Fixture {
    /// An unstarted store whose clock is the datastore's (or the system's).
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store, clock: None }
    }

    /// Declares that `store` reads time from `clock`, so cases can move it.
    pub fn with_clock(mut self, clock: ManualClock) -> Self {
        self.clock = Some(clock);
        self
    }
}

/// What a case gets: the started store, a fresh application id, and a way to move time.
#[derive(Debug, Clone)]
pub struct Harness {
    store: Arc<dyn MemoryStore>,
    clock: Option<ManualClock>,
    application_id: String,
}

impl Harness {
    /// Starts the fixture's store under a fresh random application id.
    ///
    /// # Panics
    /// If the store does not start.
    pub async fn start(fixture: Fixture) -> Self {
        fixture.store.start().await.expect("the store under test starts");
        Self {
            store: fixture.store,
            clock: fixture.clock,
            application_id: format!("conformance-{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// The store under test.
    pub fn store(&self) -> &dyn MemoryStore {
        self.store.as_ref()
    }

    /// The store under test, shared (for spawned tasks).
    pub fn shared_store(&self) -> Arc<dyn MemoryStore> {
        Arc::clone(&self.store)
    }

    /// This case's application id.
    pub fn app(&self) -> &str {
        &self.application_id
    }

    /// The default namespace of `user` in this case's application.
    ///
    /// # Panics
    /// If `user` is not a valid id.
    pub fn scope(&self, user: &str) -> MemoryScope {
        MemoryScope::new(self.application_id.clone(), user).expect("a valid user id")
    }

    /// The namespace `namespace` of `user` in this case's application.
    ///
    /// # Panics
    /// If `user` or `namespace` is not a valid id.
    pub fn scope_in(&self, user: &str, namespace: &str) -> MemoryScope {
        self.scope(user).with_namespace(namespace).expect("a valid namespace")
    }

    /// True when the store's clock is injected (so [`advance`](Self::advance) does not sleep).
    pub fn has_manual_clock(&self) -> bool {
        self.clock.is_some()
    }

    /// "Now" as the store sees it (its injected clock, or the system clock).
    pub fn now(&self) -> Timestamp {
        match &self.clock {
            Some(clock) => clock.now(),
            None => Timestamp::now(),
        }
    }

    /// Lets `by` pass for the store: moves an injected clock, or sleeps.
    pub async fn advance(&self, by: Duration) {
        match &self.clock {
            Some(clock) => clock.advance(by),
            None => tokio::time::sleep(by).await,
        }
    }

    /// An expiry far enough ahead to write with, and short enough to wait out with
    /// [`wait_for_expiry`](Self::wait_for_expiry).
    pub fn soon(&self) -> Timestamp {
        self.now().saturating_add(EXPIRY_WINDOW)
    }

    /// Lets every expiry from [`soon`](Self::soon) pass.
    pub async fn wait_for_expiry(&self) {
        self.advance(EXPIRY_WINDOW + Duration::from_millis(300)).await;
    }
}

/// How far ahead [`Harness::soon`] lies: long enough that a write and a read before the
/// expiry finish in time on a loaded machine.
const EXPIRY_WINDOW: Duration = Duration::from_millis(1500);

/// Runs one case on a fresh multi-threaded runtime: builds the fixture, starts the store, runs
/// the case, closes the store. Used by [`conformance_tests!`](crate::conformance_tests).
///
/// # Panics
/// When the case fails.
pub fn run<F, FFut, C, CFut>(factory: F, case: C)
where
    F: FnOnce() -> FFut,
    FFut: Future<Output = Fixture>,
    C: FnOnce(Harness) -> CFut,
    CFut: Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let harness = Harness::start(factory().await).await;
        let store = harness.shared_store();
        case(harness).await;
        store.close().await.expect("the store under test closes");
    });
}

/// Every case, by concern.
pub mod cases {
    pub use super::basics::*;
}

mod basics;

/// Stamps one `#[test]` per conformance case for a store factory: an `async fn() -> Fixture`
/// path.
///
/// ```ignore
/// agent_memory::conformance_tests!(my_store);
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($factory:path) => {
        $crate::__conformance_cases!($factory;
            put_then_get_round_trips,
        );
    };
}

/// Expands one test per listed case; the list lives in [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    ($factory:path; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::conformance::run($factory, $crate::conformance::cases::$case);
            }
        )*
    };
}
