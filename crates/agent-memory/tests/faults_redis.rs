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

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::{MemoryScope, MemoryStore, RedisMemoryStore};
use agent_memory_testkit::redis::RedisServer;

use support::load;

/// How long the tasks write at least; faults are scheduled within it.
const LOAD: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// `CLIENT KILL TYPE normal SKIPME yes`: every client but the one asking.
    Kill,
    /// SIGKILL the server and start it again on the same port, directory and arguments.
    Restart,
}

const SCHEDULE: &[(u64, Fault)] = &[
    (600, Fault::Kill),
    (1200, Fault::Kill),
    (2000, Fault::Restart),
    (3200, Fault::Kill),
    (4000, Fault::Restart),
    (5200, Fault::Kill),
    (5800, Fault::Kill),
    (6400, Fault::Kill),
];

#[derive(Debug, Default)]
struct ChaosReport {
    killed: Vec<u64>,
    restarts: u32,
    skipped: u32,
    log: Vec<String>,
}

async fn chaos(server: RedisServer, started: Instant) -> (RedisServer, ChaosReport) {
    let mut server = Some(server);
    let mut report = ChaosReport::default();
    for &(at_ms, fault) in SCHEDULE {
        let Some(at) = load::fault_time(started, at_ms, LOAD).await else {
            report.skipped += 1;
            continue;
        };
        let owned = server.take().expect("the server is here between faults");
        let (owned, note) = tokio::task::spawn_blocking(move || {
            let mut owned = owned;
            let note = match fault {
                Fault::Kill => owned.cli(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]),
                Fault::Restart => {
                    owned.restart();
                    "restart".to_owned()
                }
            };
            (owned, note)
        })
        .await
        .expect("the fault ran");
        server = Some(owned);
        match fault {
            Fault::Kill => match note.parse::<u64>() {
                Ok(n) => {
                    report.killed.push(n);
                    report.log.push(format!("{:.1}s kill {n}", at.as_secs_f64()));
                }
                Err(_) => report.log.push(format!("{:.1}s kill said {note:?}", at.as_secs_f64())),
            },
            Fault::Restart => {
                report.restarts += 1;
                let took = started.elapsed() - at;
                report.log.push(format!(
                    "{:.1}s restart ({:.1}s)",
                    at.as_secs_f64(),
                    took.as_secs_f64()
                ));
            }
        }
    }
    (server.expect("the server is back"), report)
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
    store.start().await.expect("start on a durable server");
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
        "redis faults: {} tasks for {:.1}s; chaos: {} (clients killed {:?}, restarts {}, \
         skipped {})\nredis faults: {}",
        load::TASKS,
        load_time.as_secs_f64(),
        report.log.join(", "),
        report.killed,
        report.restarts,
        report.skipped,
        summary.line()
    );
    summary.assert_nothing_lost();
    assert!(report.killed.iter().sum::<u64>() > 0, "the chaos killed no connection");
    assert!(report.restarts >= 1, "the server never restarted");
    assert!(summary.storage_errors > 0, "the faults never reached the store");
    assert!(summary.acked_keys >= 16 && summary.counter_acked >= 16, "too little load");
    store.close().await.expect("close");
    drop(server);
}
