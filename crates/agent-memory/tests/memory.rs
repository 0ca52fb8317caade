//! The in-process provider runs the whole conformance suite, with an injected clock.

use std::sync::Arc;

use agent_memory::conformance::Fixture;
use agent_memory::{InMemoryStore, ManualClock};

async fn store() -> Fixture {
    let clock = ManualClock::starting_now();
    Fixture::new(Arc::new(InMemoryStore::with_clock(Arc::new(clock.clone())))).with_clock(clock)
}

agent_memory::conformance_tests!(store);
