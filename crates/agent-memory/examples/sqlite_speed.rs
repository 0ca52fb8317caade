//! A rough speed check of the SQLite provider, run by hand in release mode:
//!
//! ```text
//! cargo run --release -p agent-memory --example sqlite_speed -- [RECORDS]
//! ```
//!
//! On a fresh file in a temporary folder it measures, from 16 concurrent tasks, the aggregate
//! throughput of unconditional `put` and of `get`; then the single-task latency of `get` and of
//! a first `list` page (20 records; median of 50 rounds) with 10,000 records in the file and
//! again with `RECORDS` records (default 1,000,000), 100 per user, so the two sizes can be
//! compared. Loading uses the store's own `put` from 16 tasks. It prints figures; it asserts
//! nothing.
//!
//! On Linux it also prints the process's CPU time per operation (from `/proc/self/stat`),
//! which stays meaningful when other work shares the machine and wall-clock rates do not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::sqlite::SqliteMemoryStore;
use agent_memory::{MemoryScope, MemoryStore, MemoryWrite, PageRequest};
use serde_json::json;

const TASKS: u64 = 16;
const PER_USER: u64 = 100;
const SMALL: u64 = 10_000;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn scope_of(user: u64) -> Result<MemoryScope, Error> {
    Ok(MemoryScope::new("speed", format!("user-{user:06}"))?)
}

fn key_of(n: u64) -> String {
    format!("fact-{n:04}")
}

/// Record `i` lives with user `i / PER_USER` under key `i % PER_USER`.
fn write_for(i: u64) -> MemoryWrite {
    MemoryWrite::new(format!(
        "Record {i}: prefers short answers and metric units, lives in zone {}",
        i % 24
    ))
    .metadata(json!({"category": "preferences", "n": i}))
}

/// Writes records `from..to` from 16 tasks; returns the elapsed time.
async fn load(store: &Arc<SqliteMemoryStore>, from: u64, to: u64) -> Result<Duration, Error> {
    let next = Arc::new(AtomicU64::new(from));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (store, next) = (Arc::clone(store), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= to {
                    return Ok::<(), Error>(());
                }
                store.put(&scope_of(i / PER_USER)?, &key_of(i % PER_USER), write_for(i)).await?;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(started.elapsed())
}

/// User plus system CPU time of this process so far, in seconds (Linux only).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let user: f64 = fields.next()?.parse().ok()?;
    let system: f64 = fields.next()?.parse().ok()?;
    Some((user + system) / 100.0) // clock ticks; 100 per second on Linux
}

/// Prints a rate with the CPU time each operation cost.
fn report(label: &str, ops: u64, wall: Duration, cpu_before: Option<f64>) {
    let rate = ops as f64 / wall.as_secs_f64();
    match cpu_before.zip(cpu_seconds()) {
        Some((before, after)) => println!(
            "{label:<44} {rate:>9.0} ops/s  ({:.1} µs CPU per op)",
            (after - before) * 1e6 / ops as f64
        ),
        None => println!("{label:<44} {rate:>9.0} ops/s"),
    }
}

/// A small deterministic generator, so runs are repeatable without a dependency.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// `get` of random existing records from 16 tasks for about two seconds; prints the rate.
async fn get_throughput(store: &Arc<SqliteMemoryStore>, records: u64) -> Result<(), Error> {
    let cpu = cpu_seconds();
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (store, done) = (Arc::clone(store), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
            while started.elapsed() < Duration::from_secs(2) {
                let i = rng.below(records);
                let found = store.get(&scope_of(i / PER_USER)?, &key_of(i % PER_USER)).await?;
                if found.is_none() {
                    return Err::<(), Error>("a loaded record is missing".into());
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let label = format!("get, 16 tasks, {records} records:");
    report(&label, done.load(Ordering::Relaxed), started.elapsed(), cpu);
    Ok(())
}

/// Single-task latency of `get` and of a first `list` page, in microseconds: the median of
/// 50 rounds of 200 operations each, which shrugs off rounds where other work took the CPU.
async fn latencies(store: &SqliteMemoryStore, records: u64) -> Result<(f64, f64), Error> {
    const ROUNDS: usize = 50;
    const PER_ROUND: u32 = 200;
    let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
    let (mut gets, mut lists) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..PER_ROUND {
            let i = rng.below(records);
            store.get(&scope_of(i / PER_USER)?, &key_of(i % PER_USER)).await?;
        }
        gets.push(started.elapsed().as_secs_f64() * 1e6 / f64::from(PER_ROUND));
        let started = Instant::now();
        for _ in 0..PER_ROUND {
            let user = rng.below(records / PER_USER);
            let page = store.list(&scope_of(user)?, PageRequest::new(20)).await?;
            if page.items.len() != 20 {
                return Err("a first page is not full".into());
            }
        }
        lists.push(started.elapsed().as_secs_f64() * 1e6 / f64::from(PER_ROUND));
    }
    Ok((median(gets), median(lists)))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Error> {
    let big: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 1_000_000,
    };
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteMemoryStore::new(dir.path().join("speed.db")));
    store.start().await?;

    let cpu = cpu_seconds();
    let took = load(&store, 0, SMALL).await?;
    report("put, 16 tasks, fresh file:", SMALL, took, cpu);
    get_throughput(&store, SMALL).await?;
    let (get_small, list_small) = latencies(&store, SMALL).await?;
    println!("at {SMALL:>9} records: get {get_small:6.1} µs, first list page {list_small:6.1} µs");

    let cpu = cpu_seconds();
    let took = load(&store, SMALL, big).await?;
    report(&format!("put, 16 tasks, loading to {big}:"), big - SMALL, took, cpu);
    get_throughput(&store, big).await?;
    let (get_big, list_big) = latencies(&store, big).await?;
    println!("at {big:>9} records: get {get_big:6.1} µs, first list page {list_big:6.1} µs");
    println!(
        "ratio big/small: get {:.2}x, first list page {:.2}x",
        get_big / get_small,
        list_big / list_small
    );
    let cpu = cpu_seconds();
    let overwrite = load(&store, 0, SMALL).await?;
    report(&format!("put, 16 tasks, overwriting at {big}:"), SMALL, overwrite, cpu);
    store.close().await?;
    Ok(())
}
