//! Redis faults with nothing lost: on an owned server with `appendonly yes` and
//! `appendfsync always`, 16 tasks write through one store for a few seconds while a chaos task
//! kills the store's connections and restarts the server. Every error must be `Storage`, every
//! task must write again after its last error, and afterwards every acknowledged write must be
//! present and intact when read through the same store (`support/faults.rs` says what that
//! means).
//!
//! `cargo test -p agent-memory --features redis --test faults_redis -- --nocapture` prints the
//! numbers of each run.

mod support {
    pub mod errors;
    pub mod faults;
    pub mod load;
}

use std::sync::Arc;
use std::time::Duration;

use agent_memory::RedisMemoryStore;
use agent_memory_testkit::redis::RedisServer;

use support::load::{self, Done, Fault};

/// How long the tasks write at least; the faults of [`load::SCHEDULE`] fall within it.
const LOAD: Duration = Duration::from_secs(8);

/// Applies one fault to `server`, and gives it back. A kill is `CLIENT KILL TYPE normal SKIPME
/// yes` (every client but the one asking); the test server restarts only by SIGKILL and start
/// on the same port, directory and arguments, so both kinds of restart are crash restarts.
async fn apply(server: RedisServer, fault: Fault) -> (RedisServer, Done) {
    tokio::task::spawn_blocking(move || {
        let mut server = server;
        let done = match fault {
            Fault::Kill => {
                let note = server.cli(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
                Done::Killed(note.parse::<u64>().map_err(|_| format!("the server said {note:?}")))
            }
            Fault::Restart | Fault::CrashRestart => {
                server.restart();
                Done::Restarted { crash: true }
            }
        };
        (server, done)
    })
    .await
    .expect("the fault ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keeps_every_acknowledged_write_through_killed_connections_and_restarts() {
    let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = RedisMemoryStore::builder(&server.url())
        .expect("a valid URL")
        .require_durable(true)
        .response_timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("valid options");
    load::run_under_chaos("redis", Arc::new(store), LOAD, server, apply).await;
}
