//! Model-based property test on every provider built with this test: random operation
//! sequences compared step by step with a reference model (see `support/model.rs`).

mod support {
    pub mod model;
    pub mod strategies;
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
            .build()
            .expect("valid options");
        Subject { store: Arc::new(store), clock: Some(clock) }
    });
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_store_matches_the_model() {
    check_server_store("postgres", &agent_memory_testkit::postgres::shared_url());
}

#[cfg(feature = "redis")]
#[test]
fn redis_store_matches_the_model() {
    check_server_store("redis", &agent_memory_testkit::redis::shared_url());
}

/// The same on a three-master Redis Cluster.
#[cfg(feature = "redis")]
#[test]
fn redis_cluster_store_matches_the_model() {
    check_server_store("redis cluster", &agent_memory_testkit::redis::shared_cluster_url());
}

/// Checks the store [`agent_memory::open`] makes of `url`. Its server keeps time itself, so the
/// model writes only far-future expiries there.
#[cfg(any(feature = "postgres", feature = "redis"))]
fn check_server_store(name: &str, url: &str) {
    check_against_model(name, || async {
        Subject { store: agent_memory::open(url).expect("a valid URL"), clock: None }
    });
}
