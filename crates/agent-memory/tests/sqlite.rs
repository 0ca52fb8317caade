//! The SQLite provider: the whole conformance suite on a fresh file per case, then what only a
//! file-backed store has to prove: restarts, several stores and processes on one file, a
//! process killed mid-write, files that are not ours, and read-only files.

mod support {
    pub mod child;
    pub mod errors;
}

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_memory::conformance::{increment_counter, Fixture};
use agent_memory::sqlite::SqliteMemoryStore;
use agent_memory::{ManualClock, MemoryError, MemoryScope, MemoryStore, MemoryWrite, PageRequest};
use serde_json::json;
use support::child::{runtime, say, spawn_self};
use support::errors::chain;

async fn store() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let clock = ManualClock::starting_now();
    // Every instance is on the one file and clock: the store, a second store (another process's
    // view, for the replica cases), and those with quotas or bounds.
    let on_file = {
        let (path, clock) = (dir.path().join("memories.db"), clock.clone());
        move || SqliteMemoryStore::builder(&path).clock(Arc::new(clock.clone()))
    };
    let (quota_file, bounds_file) = (on_file.clone(), on_file.clone());
    // The folder goes once the case has closed both stores.
    Fixture::new(Arc::new(on_file().build().expect("valid options")))
        .with_clock(clock)
        .with_replica(Arc::new(on_file().build().expect("valid options")))
        .with_quotas(move |quotas| {
            Arc::new(quota_file().quotas(quotas).build().expect("valid quotas"))
        })
        .with_bounds(move |bounds| {
            let mut builder = bounds_file();
            if let Some(keys) = bounds.search_scan_limit {
                builder = builder.search_scan_limit(keys);
            }
            if let Some(bytes) = bounds.search_scan_bytes {
                builder = builder.search_scan_bytes(bytes);
            }
            if let Some(records) = bounds.erase_batch_size {
                builder = builder.erase_batch_size(records);
            }
            Arc::new(builder.build().expect("valid bounds"))
        })
        .with_guard(dir)
}

agent_memory::conformance_tests!(store);

// ---------------------------------------------------------------------------------------------
// Helpers

fn scope(user: &str) -> MemoryScope {
    MemoryScope::new("sqlite-tests", user).expect("valid ids")
}

/// The content written under `key` by the multi-process tests, so a reader can check it.
fn content_for(key: &str) -> String {
    format!("content of {key}: {}", "x".repeat(200))
}

fn read_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("the file is readable")
}

/// True when the file at `path` holds the bytes of `needle`; a missing file holds nothing.
fn file_contains(path: &Path, needle: &str) -> bool {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// A temporary folder, removed when dropped, and the path of a file `name` in it (not created).
fn temp_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join(name);
    (dir, path)
}

/// A started store on a file in a temporary folder of its own, which lives as long as this.
struct OnFile {
    store: SqliteMemoryStore,
    /// The database file.
    path: PathBuf,
    /// Its write-ahead log.
    wal: PathBuf,
    /// The folder, removed when dropped: a test destructuring this binds it to keep the folder.
    _dir: tempfile::TempDir,
}

/// Starts a store on a new file named `name`.
async fn started_on_file(name: &str) -> OnFile {
    let (dir, path) = temp_file(name);
    let wal = dir.path().join(format!("{name}-wal"));
    let store = SqliteMemoryStore::new(&path);
    store.start().await.expect("start");
    OnFile { store, path, wal, _dir: dir }
}

fn folder_listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the folder is readable")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// Child processes: the test binary runs itself with these variables set, and the named test
// then plays the child's part instead of the parent's.
const ROLE_VAR: &str = "AGENT_MEMORY_SQLITE_TEST_ROLE";
const FILE_VAR: &str = "AGENT_MEMORY_SQLITE_TEST_FILE";

fn child_role() -> Option<(String, PathBuf)> {
    let role = std::env::var(ROLE_VAR).ok()?;
    let file = std::env::var_os(FILE_VAR)?;
    Some((role, PathBuf::from(file)))
}

fn spawn_role(test: &str, role: &str, file: &Path) -> Child {
    spawn_self(test, &[(ROLE_VAR, OsStr::new(role)), (FILE_VAR, file.as_os_str())])
}

// ---------------------------------------------------------------------------------------------
// Restarts

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_and_revisions_survive_a_restart() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("nested").join("folders").join("memories.db");
    let clock = ManualClock::starting_now();
    let open = || {
        SqliteMemoryStore::builder(&path)
            .clock(Arc::new(clock.clone()))
            .build()
            .expect("valid options")
    };
    let first = open();
    first.start().await.expect("start creates the folders and the file");
    let s = scope("restart").with_namespace("notes").expect("valid namespace");
    let written = first
        .put(
            &s,
            "k/ü",
            MemoryWrite::new("survives")
                .metadata(json!({"tags": ["a", "b"], "n": 1.5}))
                .source(agent_memory::Source::default().session("s-1").agent("agent")),
        )
        .await
        .expect("put");
    let doomed = first.put(&s, "doomed", MemoryWrite::new("v1")).await.expect("put");
    first.close().await.expect("close");

    let second = open();
    second.start().await.expect("start on an existing file");
    assert_eq!(second.get(&s, "k/ü").await.expect("get"), Some(written.clone()));
    assert!(second.delete(&s, "doomed", Some(&doomed.revision)).await.expect("delete"));
    let recreated = second.put(&s, "doomed", MemoryWrite::new("v2")).await.expect("put");
    assert_ne!(recreated.revision, doomed.revision, "no revision reuse after a restart");
    assert_ne!(recreated.revision, written.revision);
    let stale = second
        .put(&s, "doomed", MemoryWrite::new("v3").expected_revision(doomed.revision.clone()))
        .await
        .expect_err("the old revision must not match the re-created record");
    assert!(stale.is_conflict());

    // Erasing the user leaves the counter, so revisions still never repeat.
    assert_eq!(second.delete_user("sqlite-tests", "restart").await.expect("delete_user"), 2);
    let again = second.put(&s, "doomed", MemoryWrite::new("v4")).await.expect("put");
    assert!(![&written.revision, &doomed.revision, &recreated.revision].contains(&&again.revision));
    second.close().await.expect("close");
}

/// `delete_user` leaves no trace of the user in the file: no row, and (with secure delete) not
/// even the bytes of their ids or content in free space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_user_leaves_no_bytes_of_the_user_in_the_file() {
    let OnFile { store, path, _dir, .. } = started_on_file("erase.db").await;
    let erased = MemoryScope::new("sqlite-tests", "erased-user-7f3a").expect("valid ids");
    let kept = scope("kept-user");
    for (i, namespace) in ["", "notes", "prefs"].into_iter().enumerate() {
        let target = match namespace {
            "" => erased.clone(),
            named => erased.with_namespace(named).expect("valid namespace"),
        };
        for n in 0..400 {
            let write = MemoryWrite::new(format!("PRIVATE-CONTENT-{i}-{n} {}", "z".repeat(300)))
                .metadata(json!({"secret": "PRIVATE-METADATA"}));
            store.put(&target, &format!("key-{n}"), write).await.expect("put");
        }
    }
    store.put(&kept, "k", MemoryWrite::new("KEPT-CONTENT")).await.expect("put");
    assert_eq!(store.delete_user("sqlite-tests", "erased-user-7f3a").await.expect("erase"), 1200);
    let namespaces = store
        .list_namespaces("sqlite-tests", "erased-user-7f3a", PageRequest::default())
        .await
        .expect("list namespaces");
    assert!(namespaces.items.is_empty());
    store.close().await.expect("close checkpoints the log into the file");

    assert!(file_contains(&path, "KEPT-CONTENT"), "the other user's record is still there");
    for trace in ["erased-user-7f3a", "PRIVATE-CONTENT", "PRIVATE-METADATA"] {
        assert!(!file_contains(&path, trace), "{trace} is still in the file");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_before_start_and_after_close_are_storage_errors() {
    let (_dir, path) = temp_file("memories.db");
    let store = SqliteMemoryStore::new(&path);
    let s = scope("lifecycle");
    let err = store.get(&s, "k").await.expect_err("not started");
    assert!(err.is_storage());
    assert!(!path.exists(), "building a store touches nothing");
    store.start().await.expect("start");
    store.start().await.expect("start is idempotent");
    store.put(&s, "k", MemoryWrite::new("v")).await.expect("put");
    store.close().await.expect("close");
    store.close().await.expect("close is idempotent");
    assert!(store.put(&s, "k", MemoryWrite::new("v")).await.expect_err("closed").is_storage());
    assert!(store.list(&s, PageRequest::default()).await.expect_err("closed").is_storage());
    // Validation still comes first.
    assert!(store.get(&s, "").await.expect_err("bad key").is_invalid());
    store.start().await.expect("start again after close");
    assert_eq!(store.get(&s, "k").await.expect("get").map(|r| r.content), Some("v".into()));
    store.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_accepts_both_url_forms() {
    let (_dir, path) = temp_file("by-url.db");
    let url = format!("sqlite:{}", path.display());
    let store = agent_memory::open(&url).expect("sqlite: URL");
    store.start().await.expect("start");
    store.put(&scope("url"), "k", MemoryWrite::new("v")).await.expect("put");
    store.close().await.expect("close");
    // `sqlite://` + an absolute path gives three slashes.
    let again = agent_memory::open(&format!("sqlite://{}", path.display())).expect("sqlite:// URL");
    again.start().await.expect("start");
    assert!(again.get(&scope("url"), "k").await.expect("get").is_some());
    again.close().await.expect("close");

    let default = SqliteMemoryStore::at_default_path().map(|s| s.path().to_owned());
    assert_eq!(default.ok(), agent_memory::default_sqlite_path().ok());
    let relative = SqliteMemoryStore::from_url("SQLITE://data/m.db").expect("relative");
    assert_eq!(relative.path(), Path::new("data/m.db"));
    for bad in ["sqlite:", "sqlite://", "sqlite::memory:", "sqlite:/x.db?cache=shared"] {
        let err = SqliteMemoryStore::from_url(bad).expect_err(bad);
        assert!(matches!(err, MemoryError::Invalid { field: "url", .. }), "{bad}: {err}");
        assert!(!err.to_string().contains("x.db"));
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_files_and_folders_are_private() {
    use std::os::unix::fs::PermissionsExt;

    let mode = |path: &Path| {
        std::fs::metadata(path).expect("the file exists").permissions().mode() & 0o777
    };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("new").join("nested").join("memories.db");
    let store = SqliteMemoryStore::new(&path);
    store.start().await.expect("start creates the folders and the file");
    store.put(&scope("private"), "k", MemoryWrite::new("v")).await.expect("put");
    assert_eq!(mode(&dir.path().join("new")), 0o700, "a created folder is the owner's only");
    assert_eq!(mode(&dir.path().join("new/nested")), 0o700, "every created folder");
    assert_eq!(mode(&path), 0o600, "the database file");
    let wal = path.with_file_name("memories.db-wal");
    let shm = path.with_file_name("memories.db-shm");
    assert_eq!(mode(&wal), 0o600, "the write-ahead log");
    assert_eq!(mode(&shm), 0o600, "the shared-memory index");
    store.close().await.expect("close");

    // An existing folder and file keep what their owner chose.
    let open_dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::set_permissions(open_dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let existing = open_dir.path().join("shared.db");
    std::fs::write(&existing, b"").expect("an empty file");
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let store = SqliteMemoryStore::new(&existing);
    store.start().await.expect("start on an empty file");
    assert_eq!(mode(open_dir.path()), 0o755);
    assert_eq!(mode(&existing), 0o640);
    store.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasure_leaves_the_content_in_neither_the_file_nor_the_log() {
    let OnFile { store, path, wal, _dir } = started_on_file("erase.db").await;
    let kept = scope("kept-user");
    store.put(&kept, "k", MemoryWrite::new("KEPT-CONTENT")).await.expect("put");
    for (erase_user, user) in [(false, "namespace-eraser"), (true, "user-eraser")] {
        let s = scope(user).with_namespace("notes").expect("valid namespace");
        let marker = format!("MARKER-{user}-5e1f");
        for n in 0..50 {
            let content = format!("{marker} {n} {}", "q".repeat(2_000));
            store.put(&s, &format!("key-{n}"), MemoryWrite::new(content)).await.expect("put");
        }
        assert!(
            file_contains(&path, &marker) || file_contains(&wal, &marker),
            "the marker was written (the test would prove nothing otherwise)"
        );
        let removed = if erase_user {
            store.delete_user("sqlite-tests", user).await.expect("delete_user")
        } else {
            store.delete_all(&s).await.expect("delete_all")
        };
        assert_eq!(removed, 50);
        // The store is still open: nothing waits for close() to checkpoint.
        assert!(!file_contains(&path, &marker), "{marker} is still in the database file");
        assert!(!file_contains(&wal, &marker), "{marker} is still in the write-ahead log");
    }
    assert_eq!(
        store.get(&kept, "k").await.expect("get").map(|r| r.content).as_deref(),
        Some("KEPT-CONTENT")
    );
    store.close().await.expect("close");
}

/// The writer turns SQLite's automatic checkpoint off and leaves checkpoints to the
/// checkpointer thread, copying the remainder itself when the log reaches 32,000 pages
/// (128 MiB) without a pause: the log must stay near that size however much is written.
/// Written without any checkpoint, these records would leave a log of about 520 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_checkpointed_beside_the_writes() {
    let OnFile { store, wal, _dir, .. } = started_on_file("log.db").await;
    let s = scope("log-writer");
    let content = "w".repeat(16_000);
    let mut largest_log = 0;
    for n in 0..16_000 {
        let key = format!("key-{n:05}");
        store.put(&s, &key, MemoryWrite::new(content.clone())).await.expect("put");
        if n % 100 == 0 {
            largest_log = largest_log.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        }
    }
    assert!(
        largest_log < 192 << 20,
        "the log reached {largest_log} bytes for 256 MB written: it is not being checkpointed \
         and started over"
    );
    let last = store.get(&s, "key-15999").await.expect("get").expect("the last record");
    assert_eq!(last.content, content);
    store.close().await.expect("close");
    assert!(!wal.exists(), "closing the last connection checkpoints and removes the log");
}

// ---------------------------------------------------------------------------------------------
// Several stores and processes on one file

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_in_one_process() {
    let (_dir, path) = temp_file("shared.db");
    let a = Arc::new(SqliteMemoryStore::new(&path));
    let b = Arc::new(SqliteMemoryStore::new(&path));
    let (started_a, started_b) = tokio::join!(a.start(), b.start());
    started_a.expect("first store starts");
    started_b.expect("second store starts on the same new file");
    let s = scope("two-stores");
    let mut tasks = Vec::new();
    for task in 0..8 {
        let store: Arc<SqliteMemoryStore> = if task % 2 == 0 { a.clone() } else { b.clone() };
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                increment_counter(store.as_ref(), &s, "counter").await.map_err(|e| chain(&e))?;
                let key = format!("t{task}-{i}");
                store
                    .put(&s, &key, MemoryWrite::new(content_for(&key)))
                    .await
                    .map_err(|e| chain(&e))?;
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.expect("the task ran").expect("no storage error");
    }
    let counter = b.get(&s, "counter").await.expect("get").expect("present");
    assert_eq!(counter.content, "200", "every compare-and-set increment counted exactly once");
    for task in 0..8 {
        let reader = if task % 2 == 0 { &b } else { &a };
        let key = format!("t{task}-24");
        let record = reader.get(&s, &key).await.expect("get").expect("the other store's write");
        assert_eq!(record.content, content_for(&key));
    }
    a.close().await.expect("close");
    b.close().await.expect("close");
}

/// A lone write runs on the caller's thread only when it can begin at once: while another
/// connection holds the write lock it goes to the writer thread, which waits for the lock
/// (the busy timeout), so the caller's runtime thread is never held by the wait and the write
/// succeeds once the lock is released.
#[tokio::test(flavor = "current_thread")]
async fn a_write_waits_for_another_connections_lock_off_the_callers_thread() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("locked.db");
    let store = Arc::new(SqliteMemoryStore::new(&path));
    store.start().await.expect("start");
    let s = scope("locked");
    store.put(&s, "before", MemoryWrite::new("one")).await.expect("a write with the lock free");
    let other = rusqlite::Connection::open(&path).expect("another connection");
    other.execute_batch("BEGIN IMMEDIATE").expect("the other connection takes the write lock");
    let write = tokio::spawn({
        let (store, s) = (Arc::clone(&store), s.clone());
        async move { store.put(&s, "during", MemoryWrite::new("two")).await }
    });
    // On this single runtime thread, the sleep ends on time only if the write did not block
    // the thread waiting for the lock.
    let slept = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(slept.elapsed() < Duration::from_secs(2), "the write held the runtime's thread");
    assert!(!write.is_finished(), "the write went through while another connection held the lock");
    other.execute_batch("COMMIT").expect("the other connection releases the lock");
    let written = write.await.expect("the task ran").expect("the write succeeds after the wait");
    assert_eq!(written.content, "two");
    store.close().await.expect("close");
}

const TWO_PROCESS_OPS: usize = 150;

/// Writes from a child process and this one at the same time: compare-and-set increments on
/// one shared counter plus unconditional writes. Nobody may see a storage error (such as
/// `database is locked`), and no increment may be lost.
#[test]
fn two_processes_on_one_file() {
    if let Some((role, file)) = child_role() {
        assert_eq!(role, "two-process-writer");
        runtime().block_on(two_process_worker(&file, "child", true));
        return;
    }
    let (_dir, path) = temp_file("shared.db");
    let mut child = spawn_role("two_processes_on_one_file", "two-process-writer", &path);
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    // Both processes race to create the schema, then write side by side.
    runtime().block_on(two_process_worker(&path, "parent", false));
    let mut child_done = false;
    for line in lines.by_ref() {
        child_done |= line.expect("a line") == "done";
    }
    let status = child.wait().expect("the child exits");
    assert!(status.success() && child_done, "the child process failed: {status}");

    runtime().block_on(async {
        let store = SqliteMemoryStore::new(&path);
        store.start().await.expect("start");
        let s = scope("two-processes");
        let counter = store.get(&s, "counter").await.expect("get").expect("present");
        assert_eq!(counter.content, (2 * TWO_PROCESS_OPS).to_string());
        for who in ["parent", "child"] {
            for i in 0..TWO_PROCESS_OPS {
                let key = format!("{who}-{i}");
                let record = store.get(&s, &key).await.expect("get").expect("written");
                assert_eq!(record.content, content_for(&key));
            }
        }
        store.close().await.expect("close");
    });
}

async fn two_process_worker(path: &Path, who: &str, announce: bool) {
    let store = SqliteMemoryStore::new(path);
    store.start().await.unwrap_or_else(|e| panic!("{who}: start failed: {}", chain(&e)));
    let s = scope("two-processes");
    for i in 0..TWO_PROCESS_OPS {
        increment_counter(&store, &s, "counter")
            .await
            .unwrap_or_else(|e| panic!("{who}: increment failed: {}", chain(&e)));
        let key = format!("{who}-{i}");
        store
            .put(&s, &key, MemoryWrite::new(content_for(&key)))
            .await
            .unwrap_or_else(|e| panic!("{who}: put failed: {}", chain(&e)));
    }
    store.close().await.unwrap_or_else(|e| panic!("{who}: close failed: {}", chain(&e)));
    if announce {
        say("done");
    }
}

// ---------------------------------------------------------------------------------------------
// Durability: a writer killed with SIGKILL loses nothing it acknowledged

const ACKS_BEFORE_KILL: usize = 300;

#[cfg(unix)]
#[test]
fn acknowledged_writes_survive_sigkill() {
    if let Some((role, file)) = child_role() {
        assert_eq!(role, "sigkill-writer");
        runtime().block_on(sigkill_writer(&file));
        return;
    }
    let (_dir, path) = temp_file("killed.db");
    let mut child = spawn_role("acknowledged_writes_survive_sigkill", "sigkill-writer", &path);
    let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut killed = false;
    loop {
        line.clear();
        let read = reader.read_line(&mut line).expect("read the child's output");
        if read == 0 {
            break; // the pipe is closed: the child is gone
        }
        // A line cut short by the kill is not an acknowledgement.
        if let Some(ack) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("ack ")) {
            let (key, revision) = ack.split_once(' ').expect("ack KEY REVISION");
            acked.push((key.to_owned(), revision.to_owned()));
        }
        if !killed && (acked.len() >= ACKS_BEFORE_KILL || Instant::now() > deadline) {
            child.kill().expect("SIGKILL the writer mid-stream");
            killed = true;
        }
    }
    let status = child.wait().expect("the child is reaped");
    assert!(killed && !status.success(), "the writer was killed, not finished: {status}");
    assert!(acked.len() >= ACKS_BEFORE_KILL, "only {} acknowledgements arrived", acked.len());

    // The killed process left its write-ahead log behind; opening the file recovers it.
    let conn = rusqlite::Connection::open(&path).expect("open for an integrity check");
    let check: String =
        conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("integrity check");
    assert_eq!(check, "ok");
    drop(conn);
    runtime().block_on(async {
        let store = SqliteMemoryStore::new(&path);
        store.start().await.expect("reopen after the kill");
        let s = scope("sigkill");
        for (key, revision) in &acked {
            let record = store
                .get(&s, key)
                .await
                .expect("get")
                .unwrap_or_else(|| panic!("acknowledged record {key} is missing"));
            assert_eq!(record.content, content_for(key), "{key} is intact");
            assert_eq!(record.revision.as_str(), revision, "{key} has its acknowledged revision");
            assert_eq!(record.metadata.get("key"), Some(&json!(key)));
        }
        store.close().await.expect("close");
    });
}

/// Writes until killed (or a minute passes): four tasks, each printing `ack KEY REVISION`
/// once its `put` returned.
async fn sigkill_writer(path: &Path) {
    let store = Arc::new(SqliteMemoryStore::new(path));
    store.start().await.unwrap_or_else(|e| panic!("start failed: {}", chain(&e)));
    let s = scope("sigkill");
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..4 {
        let (store, s) = (store.clone(), s.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while started.elapsed() < Duration::from_secs(60) {
                let key = format!("w{task}-{i:06}");
                let write = MemoryWrite::new(content_for(&key)).metadata(json!({ "key": key }));
                let record = store
                    .put(&s, &key, write)
                    .await
                    .unwrap_or_else(|e| panic!("put failed: {}", chain(&e)));
                say(&format!("ack {key} {}", record.revision));
                i += 1;
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer task");
    }
}

// ---------------------------------------------------------------------------------------------
// Files that are not ours

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_a_database_is_refused_and_untouched() {
    let (dir, path) = temp_file("notes.txt");
    std::fs::write(&path, "these are my notes, not a database\n".repeat(200)).expect("write");
    let before = read_bytes(&path);
    let listing = folder_listing(dir.path());

    let store = SqliteMemoryStore::new(&path);
    let err = store.start().await.expect_err("not a database");
    assert!(err.is_storage(), "{err}");
    assert_eq!(err.to_string(), "storage error (sqlite): the file is not a SQLite database");
    assert!(std::error::Error::source(&err).is_some(), "the driver error is kept");
    assert_eq!(read_bytes(&path), before, "the file is byte for byte untouched");
    assert_eq!(folder_listing(dir.path()), listing, "no journal or WAL files were left");
    assert!(store.get(&scope("u"), "k").await.expect_err("not started").is_storage());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_applications_database_is_refused_and_untouched() {
    let (dir, path) = temp_file("other.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("create another app's database");
        conn.execute_batch(
            "CREATE TABLE memory_records (id INTEGER PRIMARY KEY, body TEXT);
             INSERT INTO memory_records (body) VALUES ('theirs');",
        )
        .expect("their schema");
    }
    let before = read_bytes(&path);
    let listing = folder_listing(dir.path());

    let err = SqliteMemoryStore::new(&path).start().await.expect_err("foreign schema");
    assert!(err.is_storage(), "{err}");
    assert_eq!(
        err.to_string(),
        "storage error (sqlite): the file holds a database of another application"
    );
    assert_eq!(read_bytes(&path), before, "the file is byte for byte untouched");
    assert_eq!(folder_listing(dir.path()), listing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_version_is_refused_and_untouched() {
    let (_dir, path) = temp_file("future.db");
    let store = SqliteMemoryStore::new(&path);
    store.start().await.expect("start");
    store.put(&scope("future"), "k", MemoryWrite::new("v")).await.expect("put");
    store.close().await.expect("close");
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        let version: i64 =
            conn.query_row("PRAGMA user_version", [], |row| row.get(0)).expect("read version");
        assert_eq!(version, 2, "the schema version is recorded");
        let app: i64 =
            conn.query_row("PRAGMA application_id", [], |row| row.get(0)).expect("read id");
        assert_eq!(app, 0x4147_4D45, "the file is marked as agent-memory's");
        conn.execute_batch("PRAGMA user_version = 3").expect("pretend a newer release wrote it");
    }
    let before = read_bytes(&path);

    let err = SqliteMemoryStore::new(&path).start().await.expect_err("newer schema");
    assert!(err.is_storage(), "{err}");
    assert!(err.to_string().contains("newer release"), "{err}");
    assert_eq!(read_bytes(&path), before);
}

/// A file written by the version 1 layout (no byte counts, no usage table) is upgraded on the
/// first writable start: every record is charged, each user's usage is summed, and the quotas
/// hold at once, counting the records written before the upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_file_is_upgraded_with_its_usage_counted() {
    let (_dir, path) = temp_file("v1.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("create a version 1 file");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE memory_records (
                 app_id TEXT NOT NULL COLLATE BINARY, user_id TEXT NOT NULL COLLATE BINARY,
                 namespace TEXT NOT NULL COLLATE BINARY, key TEXT NOT NULL COLLATE BINARY,
                 content TEXT NOT NULL, metadata TEXT NOT NULL, source_session TEXT,
                 source_invocation TEXT, source_agent TEXT, revision INTEGER NOT NULL,
                 created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, expires_at INTEGER,
                 PRIMARY KEY (app_id, user_id, namespace, key)) STRICT, WITHOUT ROWID;
             CREATE TABLE memory_meta (name TEXT NOT NULL PRIMARY KEY, value INTEGER NOT NULL)
                 STRICT, WITHOUT ROWID;
             INSERT INTO memory_meta VALUES ('last_revision', 3);
             INSERT INTO memory_records VALUES
                 ('sqlite-tests', 'old', '', 'a', 'hello', '{\"k\":1}', 's', NULL, NULL, 1, 1, 1, NULL),
                 ('sqlite-tests', 'old', 'notes', 'b', 'world', '{}', NULL, NULL, NULL, 2, 1, 1, NULL),
                 ('sqlite-tests', 'other', '', 'c', 'x', '{}', NULL, NULL, NULL, 3, 1, 1, NULL);
             PRAGMA application_id = 1095191877;
             PRAGMA user_version = 1;",
        )
        .expect("the version 1 layout");
    }
    let read_only = SqliteMemoryStore::builder(&path).read_only(true).build().expect("valid");
    let err = read_only.start().await.expect_err("a read-only store cannot upgrade");
    assert!(err.to_string().contains("version 1"), "{err}");

    // "a" is 1 + 5 + 7 + {"session_id":"s"} (18) = 31 bytes, "b" 1 + 5 + 2 + 2 = 10.
    let store = SqliteMemoryStore::builder(&path)
        .max_records_per_user(3)
        .max_bytes_per_user(31 + 10 + 12)
        .build()
        .expect("valid quotas");
    store.start().await.expect("the upgrade");
    let old = scope("old");
    assert_eq!(store.get(&old, "a").await.expect("get").expect("kept").content, "hello");
    let err = store.put(&old, "c", MemoryWrite::new("12345678")).await.expect_err("13 bytes");
    assert!(err.is_quota_exceeded(), "{err}");
    store.put(&old, "c", MemoryWrite::new("1234567")).await.expect("12 bytes fit exactly");
    let err = store.put(&old, "d", MemoryWrite::new("")).await.expect_err("a fourth record");
    assert!(matches!(err, MemoryError::QuotaExceeded { quota: "max_records_per_user", limit: 3 }));
    assert_eq!(store.delete_user("sqlite-tests", "old").await.expect("erase"), 3);
    store.put(&old, "d", MemoryWrite::new("fits again")).await.expect("freed");
    store.close().await.expect("close");
    let conn = rusqlite::Connection::open(&path).expect("open");
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0)).expect("v");
    assert_eq!(version, 2, "upgraded to version 2");
    let users: Vec<(String, i64, i64)> = conn
        .prepare("SELECT user_id, records, bytes FROM memory_usage ORDER BY user_id")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?.collect()
        })
        .expect("usage rows");
    assert_eq!(users, [("old".into(), 1, 15), ("other".into(), 1, 6)]);
}

// ---------------------------------------------------------------------------------------------
// Read-only files

/// "Read-only" means the file must not change. An ordinary user gets that from mode 0444;
/// root does not (root writes through any mode), so the store offers `read_only(true)` and
/// `?mode=ro`, which open the file with `SQLITE_OPEN_READONLY` whoever runs the process.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_file_serves_reads_and_refuses_writes() {
    use std::os::unix::fs::PermissionsExt;

    let (dir, path) = temp_file("frozen.db");
    let s = scope("frozen");
    let writer = SqliteMemoryStore::new(&path);
    writer.start().await.expect("start");
    let kept = writer.put(&s, "k", MemoryWrite::new("kept")).await.expect("put");
    writer.close().await.expect("close");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).expect("chmod 0444");
    let before = read_bytes(&path);

    let by_builder =
        SqliteMemoryStore::builder(&path).read_only(true).build().expect("valid options");
    let by_url = SqliteMemoryStore::from_url(&format!("sqlite:{}?mode=ro", path.display()))
        .expect("read-only URL");
    for store in [by_builder, by_url] {
        assert!(store.is_read_only());
        store.start().await.expect("a read-only start");
        assert_eq!(store.get(&s, "k").await.expect("get"), Some(kept.clone()));
        let page = store.list(&s, PageRequest::default()).await.expect("list");
        assert_eq!(page.items.len(), 1);
        let hits = store.search(&s, "kep", PageRequest::default()).await.expect("search");
        assert_eq!(hits.items.len(), 1);
        let err = store.put(&s, "k2", MemoryWrite::new("no")).await.expect_err("read-only");
        assert!(err.is_storage(), "{err}");
        assert!(store.delete(&s, "k", None).await.expect_err("read-only").is_storage());
        assert!(store.delete_all(&s).await.expect_err("read-only").is_storage());
        assert!(store.delete_user("sqlite-tests", "frozen").await.expect_err("ro").is_storage());
        let purge = store.purge_expired(&s, PageRequest::default()).await;
        assert!(purge.expect_err("read-only").is_storage());
        store.close().await.expect("close");
    }
    assert_eq!(read_bytes(&path), before, "the read-only file did not change");

    // A read-only store needs an existing agent-memory database and creates nothing.
    let missing = dir.path().join("missing").join("absent.db");
    let err = SqliteMemoryStore::builder(&missing)
        .read_only(true)
        .build()
        .expect("valid options")
        .start()
        .await;
    assert!(err.expect_err("nothing to read").is_storage());
    assert!(!missing.parent().expect("a parent").exists());

    // Without asking for read-only: a process that cannot write the file (anyone but root)
    // still reads, and its writes fail with a storage error.
    let writable_anyway = std::fs::OpenOptions::new().append(true).open(&path).is_ok();
    if !writable_anyway {
        let store = SqliteMemoryStore::new(&path);
        store.start().await.expect("start on a file this process cannot write");
        assert_eq!(store.get(&s, "k").await.expect("get"), Some(kept.clone()));
        let err = store.put(&s, "k2", MemoryWrite::new("no")).await.expect_err("cannot write");
        assert!(err.is_storage(), "{err}");
        store.close().await.expect("close");
        assert_eq!(read_bytes(&path), before);
    }
}

/// `create_if_missing(false)` (`?mode=rw`) opens an existing file read-write and creates
/// nothing when it is missing: not the file, not its folders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_only_refuses_a_missing_file_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let missing = dir.path().join("typo").join("absent.db");
    let by_builder = SqliteMemoryStore::builder(&missing).create_if_missing(false).build();
    let by_url = SqliteMemoryStore::from_url(&format!("sqlite:{}?mode=rw", missing.display()));
    for store in [by_builder, by_url] {
        let err = store.expect("valid options").start().await.expect_err("no file");
        assert!(matches!(err, MemoryError::Invalid { field: "path", .. }), "{err}");
        assert!(!missing.parent().expect("a parent").exists(), "a folder was created");
    }
    let path = dir.path().join("there.db");
    let s = scope("existing");
    let creator = SqliteMemoryStore::new(&path);
    creator.start().await.expect("start");
    creator.close().await.expect("close");
    let store = SqliteMemoryStore::from_url(&format!("sqlite:{}?mode=rw", path.display()))
        .expect("valid URL");
    store.start().await.expect("an existing file opens");
    store.put(&s, "k", MemoryWrite::new("v")).await.expect("writes work");
    assert!(store.get(&s, "k").await.expect("get").is_some());
    store.close().await.expect("close");
}
