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

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::{MemoryScope, MemoryStore, PostgresMemoryStore};
use agent_memory_testkit::postgres::PostgresServer;
use tokio_postgres::NoTls;

use support::load;

/// The store's `application_name`, by which the chaos task finds its backends.
const STORE_APP: &str = "agent_memory_faults";
/// How long the tasks write at least; faults are scheduled within it.
const LOAD: Duration = Duration::from_secs(9);

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// `pg_terminate_backend` of every backend of the store.
    Kill,
    /// Fast shutdown and start.
    Restart,
    /// Immediate shutdown (crash recovery on start) and start.
    CrashRestart,
}

/// When each fault happens, from the start of the load.
const SCHEDULE: &[(u64, Fault)] = &[
    (700, Fault::Kill),
    (1400, Fault::Kill),
    (2200, Fault::Restart),
    (3600, Fault::Kill),
    (4300, Fault::CrashRestart),
    (5900, Fault::Kill),
    (6600, Fault::Kill),
    (7200, Fault::Kill),
];

#[derive(Debug, Default)]
struct ChaosReport {
    killed: Vec<i64>,
    restarts: u32,
    crash_restarts: u32,
    skipped: u32,
    log: Vec<String>,
}

/// Terminates every backend of the store from a fresh admin connection; returns how many.
async fn terminate_store_backends(url: &str) -> Result<i64, String> {
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
    Ok(row.get(0))
}

async fn chaos(server: PostgresServer, started: Instant) -> (PostgresServer, ChaosReport) {
    let admin_url = format!("{}?connect_timeout=3", server.url());
    let mut server = Some(server);
    let mut report = ChaosReport::default();
    for &(at_ms, fault) in SCHEDULE {
        let Some(at) = load::fault_time(started, at_ms, LOAD).await else {
            report.skipped += 1;
            continue;
        };
        match fault {
            Fault::Kill => match terminate_store_backends(&admin_url).await {
                Ok(n) => {
                    report.killed.push(n);
                    report.log.push(format!("{:.1}s kill {n}", at.as_secs_f64()));
                }
                Err(e) => report.log.push(format!("{:.1}s kill failed: {e}", at.as_secs_f64())),
            },
            Fault::Restart | Fault::CrashRestart => {
                let mut owned = server.take().expect("the server is here between faults");
                let crash = matches!(fault, Fault::CrashRestart);
                owned = tokio::task::spawn_blocking(move || {
                    if crash {
                        owned.crash_restart();
                    } else {
                        owned.restart();
                    }
                    owned
                })
                .await
                .expect("the server restarts");
                server = Some(owned);
                let took = started.elapsed() - at;
                let name = if crash { "crash restart" } else { "restart" };
                report.log.push(format!(
                    "{:.1}s {name} ({:.1}s)",
                    at.as_secs_f64(),
                    took.as_secs_f64()
                ));
                if crash {
                    report.crash_restarts += 1;
                } else {
                    report.restarts += 1;
                }
            }
        }
    }
    (server.expect("the server is back"), report)
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
    store.start().await.expect("start");
    let store: Arc<dyn MemoryStore> = Arc::new(store);
    let app = format!("faults-{}", uuid::Uuid::new_v4().simple());
    let scope = MemoryScope::new(app, "user").expect("valid ids");

    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = load::spawn(&store, &scope, &stop);
    let (server, report) = tokio::spawn(chaos(server, started)).await.expect("the chaos task");
    let (load_time, summary) =
        load::finish(store.as_ref(), &scope, &stop, tasks, started, LOAD).await;
    eprintln!(
        "postgres faults: {} tasks for {:.1}s; chaos: {} (backends killed {:?}, restarts {}, \
         crash restarts {}, skipped {})\npostgres faults: {}",
        load::TASKS,
        load_time.as_secs_f64(),
        report.log.join(", "),
        report.killed,
        report.restarts,
        report.crash_restarts,
        report.skipped,
        summary.line()
    );
    summary.assert_nothing_lost();
    assert!(report.killed.iter().sum::<i64>() > 0, "the chaos killed no backend");
    assert!(report.restarts + report.crash_restarts >= 1, "the server never restarted");
    assert!(summary.storage_errors > 0, "the faults never reached the store");
    assert!(summary.acked_keys >= 16 && summary.counter_acked >= 16, "too little load");
    store.close().await.expect("close");
    drop(server);
}
