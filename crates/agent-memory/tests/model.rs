//! Model-based property test on every provider built with this test: random operation
//! sequences compared step by step with a reference model (see `support/model.rs`).

mod support {
    pub mod model;
}

use std::sync::Arc;

use agent_memory::{InMemoryStore, ManualClock};
use support::model::{check_against_model, Subject};

#[test]
fn in_memory_store_matches_the_model() {
    check_against_model("memory", || async {
        let clock = ManualClock::starting_now();
        Subject {
            store: Arc::new(InMemoryStore::with_clock(Arc::new(clock.clone()))),
            clock: Some(clock),
        }
    });
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_store_matches_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("model.db");
    check_against_model("sqlite", || async {
        let clock = ManualClock::starting_now();
        let store = agent_memory::SqliteMemoryStore::builder(&path)
            .clock(Arc::new(clock.clone()))
            .build();
        Subject { store: Arc::new(store), clock: Some(clock) }
    });
}
