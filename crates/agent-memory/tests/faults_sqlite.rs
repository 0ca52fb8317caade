//! SQLite faults with nothing lost: a child process (this test binary, run again) writes with
//! 16 tasks and prints each acknowledgement; the parent kills it with `SIGKILL` at a random
//! moment, several rounds on the same file, then checks every acknowledged write of every
//! round and the file's integrity (`support/faults.rs` says what "present and intact" means).
//!
//! `cargo test -p agent-memory --test faults_sqlite -- --nocapture` prints the numbers of each
//! run.
// The writer is killed with SIGKILL and its exit read as a signal: Unix only.
#![cfg(unix)]

mod support {
    pub mod child;
    pub mod errors;
    pub mod faults;
}

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::sqlite::SqliteMemoryStore;
use agent_memory::{MemoryRecord, MemoryScope, MemoryStore, MemoryWrite, PageRequest};
use serde_json::Value;

use support::child::{runtime, say, spawn_self};
use support::errors::chain;
use support::faults::{counter_key, counter_metadata, data_content, data_metadata, write_id_of};

/// A random number from the operating system's entropy (through a v4 UUID).
fn random_u64() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

const TEST_NAME: &str = "sqlite_keeps_every_acknowledged_write_through_repeated_sigkill";
const ROLE_VAR: &str = "AGENT_MEMORY_FAULTS_ROLE";
const FILE_VAR: &str = "AGENT_MEMORY_FAULTS_FILE";
const ROUND_VAR: &str = "AGENT_MEMORY_FAULTS_ROUND";
const TASKS: usize = 16;
const ROUNDS: u32 = 5;
/// The kill comes this long after the child is spawned, at random in this range.
const KILL_AFTER_MS: (u64, u64) = (15, 1400);
/// A writer that is never killed stops by itself after this long (and fails the test).
const WRITER_LIFETIME: Duration = Duration::from_secs(30);

fn scope() -> MemoryScope {
    MemoryScope::new("faults", "sigkill").expect("valid ids")
}

/// Which write: round, task and the task's operation index. Ordered as they happen within
/// one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct WriteId {
    round: u32,
    task: usize,
    index: u64,
}

impl WriteId {
    fn text(&self) -> String {
        format!("r{}-t{:02}-i{:06}", self.round, self.task, self.index)
    }

    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('-');
        let round = parts.next()?.strip_prefix('r')?.parse().ok()?;
        let task = parts.next()?.strip_prefix('t')?.parse().ok()?;
        let index = parts.next()?.strip_prefix('i')?.parse().ok()?;
        parts.next().is_none().then_some(Self { round, task, index })
    }

    /// The key this write goes to: every third write increments the task's counter, the
    /// other two create and then overwrite a key of their own.
    fn key(&self) -> String {
        if self.index % 3 == 2 {
            counter_key(self.task)
        } else {
            format!("r{}-t{:02}-k{:05}", self.round, self.task, self.index / 3)
        }
    }

    fn is_counter(&self) -> bool {
        self.index % 3 == 2
    }
}

/// One acknowledgement line: `ack KEY REVISION WRITE-ID COUNT` (`-` for no count).
#[derive(Debug, Clone)]
struct Ack {
    key: String,
    revision: String,
    id: WriteId,
    count: Option<u64>,
}

fn parse_ack(line: &str) -> Option<Ack> {
    let mut words = line.strip_prefix("ack ")?.split(' ');
    let key = words.next()?.to_owned();
    let revision = words.next()?.to_owned();
    let id = WriteId::parse(words.next()?)?;
    let count = match words.next()? {
        "-" => None,
        n => Some(n.parse().ok()?),
    };
    words.next().is_none().then_some(Ack { key, revision, id, count })
}

/// Reports an error of the writer to the parent and ends the process at once (a panic
/// in one task would leave the others writing until the kill, unnoticed).
fn die(what: &str) -> ! {
    say(&format!("error {what}"));
    std::process::exit(3)
}

/// The child: 16 tasks writing until killed, each printing an acknowledgement once its
/// `put` returned. Any error ends it (the parent then sees an exit instead of a kill).
async fn writer(path: &Path, round: u32) {
    let store = Arc::new(SqliteMemoryStore::new(path));
    store.start().await.unwrap_or_else(|e| die(&format!("start: {}", chain(&e))));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let s = scope();
            let mut index = 0u64;
            while started.elapsed() < WRITER_LIFETIME {
                let id = WriteId { round, task, index };
                let (key, text) = (id.key(), id.text());
                index += 1;
                let (write, count) = if id.is_counter() {
                    let current = store
                        .get(&s, &key)
                        .await
                        .unwrap_or_else(|e| die(&format!("get {key}: {}", chain(&e))));
                    let (count, write) = match current {
                        None => (1, MemoryWrite::new("1").create_only()),
                        Some(record) => {
                            let seen: u64 = record
                                .content
                                .parse()
                                .unwrap_or_else(|_| die(&format!("{key} is not a count")));
                            let write = MemoryWrite::new((seen + 1).to_string())
                                .expected_revision(record.revision);
                            (seen + 1, write)
                        }
                    };
                    (write.metadata(counter_metadata(&text, task, count)), Some(count))
                } else {
                    let write = MemoryWrite::new(data_content(&key, &text))
                        .metadata(data_metadata(&text, task));
                    (write, None)
                };
                let record = store
                    .put(&s, &key, write)
                    .await
                    .unwrap_or_else(|e| die(&format!("put {key}: {}", chain(&e))));
                let count = count.map_or_else(|| "-".to_owned(), |n| n.to_string());
                say(&format!("ack {key} {} {text} {count}", record.revision));
            }
        }));
    }
    for task in tasks {
        task.await.expect("a writing task");
    }
}

/// One round: spawn the writer, kill it with SIGKILL after `delay`, return its acks.
fn round(path: &Path, round: u32, delay: Duration) -> Vec<Ack> {
    let round_text = round.to_string();
    let vars = [
        (ROLE_VAR, OsStr::new("writer")),
        (FILE_VAR, path.as_os_str()),
        (ROUND_VAR, OsStr::new(&round_text)),
    ];
    let mut child = spawn_self(TEST_NAME, &vars);
    let spawned = Instant::now();
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let (mut acks, mut errors) = (Vec::new(), Vec::new());
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break, // the pipe closed: the writer is gone
                Ok(_) => {}
            }
            // A line cut short by the kill (no newline) is not an acknowledgement.
            if let Some(ack) = line.strip_suffix('\n').and_then(parse_ack) {
                acks.push(ack);
            } else if let Some(error) = line.strip_prefix("error ") {
                errors.push(error.trim_end().to_owned());
            }
        }
        (acks, errors)
    });
    std::thread::sleep(delay.saturating_sub(spawned.elapsed()));
    child.kill().expect("SIGKILL the writer");
    let status = child.wait().expect("the writer is reaped");
    let (acks, errors) = reader.join().expect("the reader thread");
    assert!(errors.is_empty(), "round {round}: the writer failed: {errors:?}");
    assert_eq!(
        status.signal(),
        Some(9),
        "round {round}: the writer must die by SIGKILL, not end by itself: {status}"
    );
    acks
}

fn integrity_check(path: &Path) -> String {
    let conn = rusqlite::Connection::open(path).expect("open for an integrity check");
    conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("integrity check")
}

#[test]
fn sqlite_keeps_every_acknowledged_write_through_repeated_sigkill() {
    if let (Ok(role), Some(file), Ok(n)) = (
        std::env::var(ROLE_VAR),
        std::env::var_os(FILE_VAR),
        std::env::var(ROUND_VAR).map(|r| r.parse::<u32>()),
    ) {
        assert_eq!(role, "writer");
        runtime().block_on(writer(&PathBuf::from(file), n.expect("a round number")));
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("killed.db");
    let mut acks = Vec::new();
    let mut per_round = Vec::new();
    for r in 0..ROUNDS {
        let span = KILL_AFTER_MS.1 - KILL_AFTER_MS.0;
        let delay = Duration::from_millis(KILL_AFTER_MS.0 + random_u64() % span);
        let got = round(&path, r, delay);
        // Each reopen recovers the log the killed writer left; the file stays consistent.
        let check = integrity_check(&path);
        assert_eq!(check, "ok", "integrity check after round {r}");
        per_round.push(format!("{}ms: {} acks", delay.as_millis(), got.len()));
        acks.extend(got);
    }

    let (report, failures) = runtime().block_on(verify(&path, &acks));
    let check = integrity_check(&path);
    eprintln!(
        "sqlite faults: {ROUNDS} rounds of {TASKS} writer tasks killed with SIGKILL after \
         [{}]\nsqlite faults: {report}; integrity_check {check}",
        per_round.join(", ")
    );
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures.iter().take(30).cloned().collect::<Vec<_>>().join("\n")
    );
    assert_eq!(check, "ok");
    assert!(acks.len() >= 100, "only {} writes were acknowledged in all", acks.len());
}

/// Reopens the file and checks every acknowledged write; returns the summary line and the
/// failures.
async fn verify(path: &Path, acks: &[Ack]) -> (String, Vec<String>) {
    let mut failures = Vec::new();
    let store = SqliteMemoryStore::new(path);
    store.start().await.expect("reopen after the last kill");
    let s = scope();
    let mut stored: HashMap<String, MemoryRecord> = HashMap::new();
    let mut page = PageRequest::new(100);
    for _ in 0..=(acks.len() / 100 + 200) {
        let result = store.list(&s, page.clone()).await.expect("list");
        stored.extend(result.items.into_iter().map(|r| (r.key.clone(), r)));
        match result.next_cursor {
            Some(cursor) => page = PageRequest::new(100).after(cursor),
            None => break,
        }
    }

    let acked_ids: HashMap<WriteId, &Ack> = acks.iter().map(|a| (a.id, a)).collect();
    if acked_ids.len() != acks.len() {
        failures.push("a write was acknowledged twice".to_owned());
    }
    let mut last_per_key: HashMap<&str, &Ack> = HashMap::new();
    let mut last_per_task: HashMap<(u32, usize), u64> = HashMap::new();
    for ack in acks {
        if ack.key != ack.id.key() || ack.count.is_some() != ack.id.is_counter() {
            failures.push(format!("malformed acknowledgement {ack:?}"));
        }
        let last = last_per_key.entry(&ack.key).or_insert(ack);
        if last.id < ack.id {
            *last = ack;
        }
        let task = last_per_task.entry((ack.id.round, ack.id.task)).or_insert(ack.id.index);
        *task = (*task).max(ack.id.index);
    }

    // Every acknowledged key holds its last acknowledged write, or the one write its task
    // had in flight when it was killed.
    let mut in_flight_committed = 0u64;
    let mut present: HashSet<&str> = HashSet::new();
    for (key, last) in &last_per_key {
        let Some(record) = stored.get(*key) else {
            failures.push(format!("{key}: acknowledged write {} is lost", last.id.text()));
            continue;
        };
        let Some(found) = write_id_of(&record.metadata).and_then(WriteId::parse) else {
            failures.push(format!("{key}: the record names no write"));
            continue;
        };
        if found == last.id {
            if record.revision.as_str() != last.revision {
                failures.push(format!(
                    "{key}: acknowledged with revision {} but holds {}",
                    last.revision, record.revision
                ));
                continue;
            }
        } else if found < last.id {
            failures.push(format!(
                "{key}: holds write {} but {} was acknowledged after it",
                found.text(),
                last.id.text()
            ));
            continue;
        }
        present.insert(key);
    }

    // Every record found: intact, and either acknowledged or the one write in flight.
    for (key, record) in &stored {
        let Some(id) = write_id_of(&record.metadata).and_then(WriteId::parse) else {
            failures.push(format!("{key}: the record names no write"));
            continue;
        };
        let text = id.text();
        let intact = if id.is_counter() {
            let count = record.content.parse::<u64>().ok();
            count.is_some_and(|n| {
                Value::Object(record.metadata.clone()) == counter_metadata(&text, id.task, n)
            })
        } else {
            record.content == data_content(key, &text)
                && Value::Object(record.metadata.clone()) == data_metadata(&text, id.task)
        };
        if id.key() != *key || !intact || record.scope != s {
            present.remove(key.as_str());
            failures.push(format!("{key}: the record of write {text} is not intact"));
            continue;
        }
        if let Some(ack) = acked_ids.get(&id) {
            if ack.count.is_some_and(|n| n.to_string() != record.content) {
                present.remove(key.as_str());
                failures.push(format!("{key}: holds a count other than acknowledged"));
            }
            continue;
        }
        let in_flight = last_per_task.get(&(id.round, id.task)).map_or(0, |last| last + 1);
        if id.index != in_flight {
            failures.push(format!(
                "{key}: holds unacknowledged write {text}, but only write {in_flight} of that \
                 task was in flight when it was killed"
            ));
            continue;
        }
        in_flight_committed += 1;
    }

    // Counters: acknowledged counts strictly increase across rounds, and the final count
    // lies between the acknowledged increments and that plus one in-flight one per round.
    let mut counter_acked = 0u64;
    let mut counter_committed_unacked = 0u64;
    for task in 0..TASKS {
        let key = counter_key(task);
        let mut counts: BTreeMap<WriteId, u64> = BTreeMap::new();
        for ack in acks.iter().filter(|a| a.key == key) {
            counts.insert(ack.id, ack.count.unwrap_or_default());
        }
        let sequence: Vec<u64> = counts.values().copied().collect();
        if sequence.windows(2).any(|w| w[0] >= w[1]) {
            failures
                .push(format!("{key}: acknowledged counts do not increase: an increment was lost"));
        }
        let acked = u64::try_from(sequence.len()).expect("a count");
        counter_acked += acked;
        let Some(final_count) = stored.get(&key).and_then(|r| r.content.parse::<u64>().ok()) else {
            if acked > 0 {
                failures.push(format!("{key} is missing"));
            }
            continue;
        };
        if final_count < acked || final_count > acked + u64::from(ROUNDS) {
            failures.push(format!("{key} is {final_count} after {acked} acknowledged increments"));
        } else {
            counter_committed_unacked += final_count - acked;
        }
    }
    let distinct: HashSet<&str> = last_per_key.keys().copied().collect();
    store.close().await.expect("close");
    let report = format!(
        "acknowledged writes {} on {} keys (counter increments {}); present and intact \
         afterwards {}/{} keys; unacknowledged in-flight writes found committed \
         {in_flight_committed} (counter increments {counter_committed_unacked}); records \
         in the file {}; errors seen 0 (the writer stops at any error)",
        acks.len(),
        distinct.len(),
        counter_acked,
        present.len(),
        distinct.len(),
        stored.len()
    );
    (report, failures)
}
