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

/// PostgreSQL keeps time itself: the model writes only far-future expiries there.
#[cfg(feature = "postgres")]
#[test]
fn postgres_store_matches_the_model() {
    let url = agent_memory_testkit::postgres::shared_url();
    check_against_model("postgres", || async {
        let store = agent_memory::PostgresMemoryStore::from_url(&url).expect("a valid URL");
        Subject { store: Arc::new(store), clock: None }
    });
}

/// Redis keeps time itself: the model writes only far-future expiries there.
#[cfg(feature = "redis")]
#[test]
fn redis_store_matches_the_model() {
    let url = agent_memory_testkit::redis::shared_url();
    check_against_model("redis", || async {
        let store = agent_memory::RedisMemoryStore::from_url(&url).expect("a valid URL");
        Subject { store: Arc::new(store), clock: None }
    });
}

/// The same on a three-master Redis Cluster.
#[cfg(feature = "redis")]
#[test]
fn redis_cluster_store_matches_the_model() {
    let url = agent_memory_testkit::redis::shared_cluster_url();
    check_against_model("redis cluster", || async {
        let store = agent_memory::RedisMemoryStore::from_url(&url).expect("a valid cluster URL");
        Subject { store: Arc::new(store), clock: None }
    });
}
