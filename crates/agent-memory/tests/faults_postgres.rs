//! PostgreSQL faults with nothing lost: on an owned server with durable settings, 16 tasks
//! write through one store for a few seconds while a chaos task kills the store's connections
//! and restarts the server (cleanly and as a crash). Every error must be `Storage`, every task
//! must write again after its last error, and afterwards every acknowledged write must be
//! present and intact when read through the same store (`support/faults.rs` says what that
//! means).
//!
//! `cargo test -p agent-memory --features postgres --test faults_postgres -- --nocapture`
//! prints the numbers of each run.

mod support {
    pub mod errors;
    pub mod faults;
    pub mod load;
}

use std::sync::Arc;
use std::time::Duration;

use agent_memory::PostgresMemoryStore;
use agent_memory_testkit::postgres::PostgresServer;
use tokio_postgres::NoTls;

use support::load::{self, Done, Fault};

/// The store's `application_name`, by which the chaos task finds its backends.
const STORE_APP: &str = "agent_memory_faults";
/// How long the tasks write at least; the faults of [`load::SCHEDULE`] fall within it.
const LOAD: Duration = Duration::from_secs(9);

/// Terminates every backend of the store from a fresh admin connection; returns how many.
async fn terminate_store_backends(url: &str) -> Result<u64, String> {
    let (client, connection) =
        tokio_postgres::connect(url, NoTls).await.map_err(|e| format!("connect: {e}"))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
            &[&STORE_APP],
        )
        .await
        .map_err(|e| format!("terminate: {e}"))?;
    drop(client);
    let _ = driver.await;
    u64::try_from(row.get::<_, i64>(0)).map_err(|e| format!("count: {e}"))
}

/// Applies one fault to `server`, and gives it back.
async fn apply(server: PostgresServer, fault: Fault) -> (PostgresServer, Done) {
    match fault {
        Fault::Kill => {
            let admin_url = format!("{}?connect_timeout=3", server.url());
            (server, Done::Killed(terminate_store_backends(&admin_url).await))
        }
        Fault::Restart | Fault::CrashRestart => {
            let crash = matches!(fault, Fault::CrashRestart);
            let server = tokio::task::spawn_blocking(move || {
                let mut server = server;
                if crash {
                    server.crash_restart();
                } else {
                    server.restart();
                }
                server
            })
            .await
            .expect("the server restarts");
            (server, Done::Restarted { crash })
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_every_acknowledged_write_through_killed_connections_and_restarts() {
    let server = PostgresServer::start_durable();
    let url = format!("{}?application_name={STORE_APP}", server.url());
    let store = PostgresMemoryStore::builder(&url)
        .expect("a valid URL")
        .max_connections(16)
        .min_connections(4)
        .connect_timeout(Duration::from_secs(3))
        .acquire_timeout(Duration::from_secs(5))
        .build()
        .expect("a valid configuration");
    load::run_under_chaos("postgres", Arc::new(store), LOAD, server, apply).await;
}
