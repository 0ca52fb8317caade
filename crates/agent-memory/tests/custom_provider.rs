//! The example provider in `examples/custom_provider.rs`, written only against the public API,
//! runs the whole conformance suite exactly as a provider in another crate would.

use std::sync::Arc;

use agent_memory::conformance::Fixture;

#[path = "../examples/custom_provider.rs"]
mod custom_provider;

use custom_provider::MapStore;

/// The records live inside the one instance, on an injected clock: each quota case's store
/// is a datastore of its own, and the replica cases race tasks of the one instance.
async fn store() -> Fixture {
    Fixture::in_process(|clock, quotas| Arc::new(MapStore::with_quotas(clock, quotas)))
}

agent_memory::conformance_tests!(store);
