//! The example provider in `examples/custom_provider.rs`, written only against the public API,
//! runs the whole conformance suite exactly as a provider in another crate would.

use std::sync::Arc;

use agent_memory::conformance::Fixture;
use agent_memory::ManualClock;

#[path = "../examples/custom_provider.rs"]
mod custom_provider;

use custom_provider::MapStore;

/// No replica: the records live inside the one instance, so the replica cases race tasks of
/// it instead. Each quota case's store is a datastore of its own, on the same clock.
async fn store() -> Fixture {
    let clock = ManualClock::starting_now();
    let quota_clock = clock.clone();
    Fixture::new(Arc::new(MapStore::with_clock(Arc::new(clock.clone()))))
        .with_clock(clock)
        .with_quotas(move |quotas| {
            Arc::new(MapStore::with_quotas(Arc::new(quota_clock.clone()), quotas))
        })
}

agent_memory::conformance_tests!(store);
