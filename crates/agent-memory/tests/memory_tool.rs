//! The memory tool over real stores: texts, directories as key prefixes, renames, bounded
//! directory operations, an interrupted rename finished by a retry, and races (16 tasks
//! inserting lines into one file, on the in-process store and on SQLite).
//!
//! The texts are checked against the reference implementation by the differential test
//! (`memory_tool_reference.rs`); the texts asserted here are the ones that test cannot reach.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_memory::sqlite::SqliteMemoryStore;
use agent_memory::tools::{ToolError, ToolErrorKind};
use agent_memory::{
    memory_tool, InMemoryStore, MemoryScope, MemoryStore, PageRequest, ScopedMemory,
};
use serde_json::{json, Value};

fn scope() -> MemoryScope {
    MemoryScope::new("memory-tool-tests", "user-1").unwrap().with_namespace("files").unwrap()
}

async fn in_memory() -> ScopedMemory {
    let store = Arc::new(InMemoryStore::new());
    store.start().await.unwrap();
    ScopedMemory::new(store, scope())
}

async fn ok(memory: &ScopedMemory, input: Value) -> String {
    match memory_tool::run(memory, &input).await {
        Ok(text) => text,
        Err(err) => panic!("{input} failed: {err}"),
    }
}

async fn fail(memory: &ScopedMemory, input: Value) -> ToolError {
    match memory_tool::run(memory, &input).await {
        Ok(text) => panic!("{input} unexpectedly succeeded: {text}"),
        Err(err) => err,
    }
}

async fn create(memory: &ScopedMemory, path: &str, text: &str) {
    ok(memory, json!({"command": "create", "path": path, "file_text": text})).await;
}

/// The input of a `str_replace` of `old` by `new` in the file at `path`.
fn str_replace(path: &str, old: &str, new: &str) -> Value {
    json!({"command": "str_replace", "path": path, "old_str": old, "new_str": new})
}

async fn view(memory: &ScopedMemory, path: &str) -> String {
    ok(memory, json!({"command": "view", "path": path})).await
}

/// Every record of the scope, key to content, read past the tool.
async fn records(memory: &ScopedMemory) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    let mut page = PageRequest::new(100);
    loop {
        let result = memory.list(page.clone()).await.unwrap();
        all.extend(result.items.into_iter().map(|r| (r.key, r.content)));
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => return all,
        }
    }
}

/// A started SQLite store on the file at `path`.
async fn started_on(path: &Path) -> Arc<SqliteMemoryStore> {
    let store = Arc::new(SqliteMemoryStore::new(path));
    store.start().await.unwrap();
    store
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap()
}

/// Runs `test` on a multi-threaded runtime with the path of a database file called `name` in a
/// fresh folder, removed afterwards.
fn on_file<F: std::future::Future<Output = ()>>(name: &str, test: impl FnOnce(PathBuf) -> F) {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(test(dir.path().join(name)));
}

#[tokio::test]
async fn a_session_reads_like_the_reference() {
    let memory = in_memory().await;
    assert_eq!(
        view(&memory, "/memories").await,
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden \
         items:\n4K\t/memories"
    );
    create(&memory, "/memories/notes/todo.md", "- milk\n- eggs\n").await;
    create(&memory, "/memories/profile.md", &"x".repeat(1536)).await;
    create(&memory, "/memories/.hidden", "secret").await;
    assert_eq!(
        view(&memory, "/memories").await,
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden \
         items:\n4K\t/memories\n4K\t/memories/notes/\n14B\t/memories/notes/todo.md\n\
         1.5K\t/memories/profile.md"
    );
    let replaced = ok(&memory, str_replace("/memories/notes/todo.md", "eggs", "bread")).await;
    assert_eq!(
        replaced,
        "The memory file has been edited. Here is the snippet showing the change (with line \
         numbers):\n     1\t- milk\n     2\t- bread\n     3\t"
    );
    let twice = fail(&memory, str_replace("/memories/notes/todo.md", "- ", "* ")).await;
    assert_eq!(
        twice.message(),
        "No replacement was performed. Multiple occurrences of old_str `- ` in lines: 1, 2. \
         Please ensure it is unique"
    );
    let far = fail(
        &memory,
        json!({"command": "insert", "path": "/memories/notes/todo.md", "insert_line": 3,
               "insert_text": "- jam"}),
    )
    .await;
    assert_eq!(
        far.message(),
        "Invalid `insert_line` parameter: 3. It should be within the range [0, 2]."
    );
    assert_eq!(
        fail(&memory, json!({"command": "delete", "path": "/memories"})).await.message(),
        "Cannot delete the /memories directory itself"
    );
    assert_eq!(
        fail(&memory, json!({"command": "view", "path": "/memories/nope"})).await.message(),
        "The path /memories/nope does not exist. Please provide a valid path."
    );
    // The record is the file, keyed by its path below /memories.
    assert_eq!(records(&memory).await["notes/todo.md"], "- milk\n- bread\n");
}

#[tokio::test]
async fn directories_exist_only_while_they_hold_a_file() {
    let memory = in_memory().await;
    create(&memory, "/memories/a/b/c.md", "c").await;
    assert!(view(&memory, "/memories/a").await.contains("4K\t/memories/a/b/\n"));
    ok(&memory, json!({"command": "delete", "path": "/memories/a/b/c.md"})).await;
    let gone = fail(&memory, json!({"command": "view", "path": "/memories/a"})).await;
    assert_eq!(gone.message(), "The path /memories/a does not exist. Please provide a valid path.");
    assert!(records(&memory).await.is_empty());
}

#[tokio::test]
async fn rename_moves_files_and_directories_and_refuses_existing_destinations() {
    let memory = in_memory().await;
    create(&memory, "/memories/draft.md", "one").await;
    create(&memory, "/memories/old/x.md", "x").await;
    create(&memory, "/memories/old/deep/y.md", "y").await;
    let renamed = ok(
        &memory,
        json!({"command": "rename", "old_path": "/memories/draft.md",
               "new_path": "/memories/final/draft.md"}),
    )
    .await;
    assert_eq!(renamed, "Successfully renamed /memories/draft.md to /memories/final/draft.md");
    ok(
        &memory,
        json!({"command": "rename", "old_path": "/memories/old", "new_path": "/memories/new"}),
    )
    .await;
    let expected: BTreeMap<String, String> =
        [("final/draft.md", "one"), ("new/deep/y.md", "y"), ("new/x.md", "x")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    assert_eq!(records(&memory).await, expected, "no journal record is left behind");
    let taken = fail(
        &memory,
        json!({"command": "rename", "old_path": "/memories/new/x.md", "new_path": "/memories/final"}),
    )
    .await;
    assert_eq!(taken.message(), "The destination /memories/final already exists");
    let missing = fail(
        &memory,
        json!({"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/n2"}),
    )
    .await;
    assert_eq!(missing.message(), "The path /memories/nope does not exist");
    let root = fail(
        &memory,
        json!({"command": "rename", "old_path": "/memories", "new_path": "/memories/x"}),
    )
    .await;
    assert_eq!(root.message(), "Cannot rename the /memories directory itself");
}

#[tokio::test]
async fn a_file_in_the_way_and_a_directory_into_itself_are_refused() {
    let memory = in_memory().await;
    create(&memory, "/memories/a.md", "a").await;
    create(&memory, "/memories/dir/f", "f").await;
    let below_file =
        fail(&memory, json!({"command": "create", "path": "/memories/a.md/b.md", "file_text": ""}))
            .await;
    assert_eq!(
        below_file.message(),
        "Cannot use the path /memories/a.md/b.md: /memories/a.md is a file, not a directory."
    );
    let into_itself = fail(
        &memory,
        json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/dir/sub"}),
    )
    .await;
    assert!(into_itself.message().contains("cannot move into itself"), "{into_itself}");
    let over_dir =
        fail(&memory, json!({"command": "create", "path": "/memories/dir", "file_text": ""})).await;
    assert_eq!(over_dir.message(), "File /memories/dir already exists");
    assert_eq!(records(&memory).await.len(), 2, "nothing changed");
}

#[tokio::test]
async fn bad_paths_and_input_are_refused_and_change_nothing() {
    let memory = in_memory().await;
    create(&memory, "/memories/keep.md", "keep").await;
    for (input, message) in [
        (json!({"command": "view", "path": "/etc"}), "Path must start with /memories, got: /etc"),
        (
            json!({"command": "delete", "path": "/memories/../keep.md"}),
            "Path /memories/../keep.md would escape /memories directory",
        ),
        (
            json!({"command": "delete", "path": "/memories/%2e%2e/x"}),
            "Path /memories/%2e%2e/x would escape /memories directory",
        ),
        (
            json!({"command": "create", "path": "/memoriesX", "file_text": ""}),
            "Path /memoriesX would escape /memories directory",
        ),
    ] {
        assert_eq!(fail(&memory, input).await.message(), message);
    }
    let smuggled = fail(
        &memory,
        json!({"command": "delete", "path": "/memories/keep.md", "user_id": "someone-else"}),
    )
    .await;
    assert_eq!(smuggled.kind(), ToolErrorKind::InvalidArguments);
    assert_eq!(smuggled.field(), Some("user_id"));
    let huge = "x".repeat(65_537);
    let too_big =
        fail(&memory, json!({"command": "create", "path": "/memories/big", "file_text": huge}))
            .await;
    assert!(too_big.message().contains("65536 bytes"), "{too_big}");
    let long = format!("/memories/{}", "k".repeat(257));
    let too_long = fail(&memory, json!({"command": "create", "path": long, "file_text": ""})).await;
    assert!(too_long.message().contains("at most 256 bytes"), "{too_long}");
    assert_eq!(records(&memory).await.keys().collect::<Vec<_>>(), ["keep.md"]);
}

#[tokio::test]
async fn large_directories_are_deleted_and_renamed_in_bounded_calls() {
    let memory = in_memory().await;
    for i in 0..1_050 {
        memory.put(&format!("big/f{i:04}.md"), format!("file {i}")).await.unwrap();
    }
    let listing = view(&memory, "/memories/big").await;
    assert!(listing.ends_with("view a directory inside it to see the rest.)"), "{listing}");

    let rename =
        json!({"command": "rename", "old_path": "/memories/big", "new_path": "/memories/moved"});
    let first = fail(&memory, rename.clone()).await;
    assert_eq!(first.kind(), ToolErrorKind::Incomplete, "{first}");
    assert!(first.message().contains("Run the same rename again"), "{first}");
    let halfway = records(&memory).await;
    assert_eq!(halfway.keys().filter(|k| k.starts_with("moved/")).count(), 1_000);
    assert_eq!(halfway.keys().filter(|k| k.starts_with("big/")).count(), 50);
    assert!(halfway.contains_key("/big"), "the journal names the rename under way");
    // Another destination is refused while this rename is unfinished.
    let elsewhere = fail(
        &memory,
        json!({"command": "rename", "old_path": "/memories/big", "new_path": "/memories/other"}),
    )
    .await;
    assert_eq!(elsewhere.kind(), ToolErrorKind::Conflict, "{elsewhere}");
    assert_eq!(ok(&memory, rename).await, "Successfully renamed /memories/big to /memories/moved");
    let done = records(&memory).await;
    assert_eq!(done.len(), 1_050, "every file once, no journal left");
    assert!((0..1_050).all(|i| done[&format!("moved/f{i:04}.md")] == format!("file {i}")));

    let delete = json!({"command": "delete", "path": "/memories/moved"});
    assert_eq!(fail(&memory, delete.clone()).await.kind(), ToolErrorKind::Incomplete);
    assert_eq!(records(&memory).await.len(), 50);
    assert_eq!(ok(&memory, delete).await, "Successfully deleted /memories/moved");
    assert!(records(&memory).await.is_empty());
}

/// A rename cut short by the store going away is finished by the same rename on a new store
/// over the same file: every file ends at its new path exactly once, with its content.
#[test]
fn an_interrupted_directory_rename_is_finished_by_the_same_rename() {
    const FILES: usize = 600;
    on_file("memories.db", |path| async move {
        let first = started_on(&path).await;
        let memory = ScopedMemory::new(first.clone(), scope());
        for i in 0..FILES {
            memory.put(&format!("src/f{i:04}"), format!("content {i}")).await.unwrap();
        }
        let watcher = started_on(&path).await;
        let rename =
            json!({"command": "rename", "old_path": "/memories/src", "new_path": "/memories/dst"});
        let running = tokio::spawn({
            let (memory, rename) = (memory.clone(), rename.clone());
            async move { memory_tool::run(&memory, &rename).await }
        });
        // Close the store once some files have moved.
        loop {
            let moved = watcher.list(&scope(), PageRequest::new(100).prefix("dst/")).await.unwrap();
            if moved.items.len() >= 20 || running.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        first.close().await.unwrap();
        let outcome = running.await.unwrap();
        let err = outcome.expect_err("the rename was cut short before it finished");
        assert_eq!(err.kind(), ToolErrorKind::Unavailable, "{err}");

        let second = started_on(&path).await;
        let memory = ScopedMemory::new(second.clone(), scope());
        assert_eq!(
            ok(&memory, rename).await,
            "Successfully renamed /memories/src to /memories/dst"
        );
        let all = records(&memory).await;
        assert_eq!(
            all.len(),
            FILES,
            "each file exactly once, and no journal: {:?}",
            all.keys().take(3)
        );
        for i in 0..FILES {
            assert_eq!(all.get(&format!("dst/f{i:04}")), Some(&format!("content {i}")), "file {i}");
        }
        second.close().await.unwrap();
        watcher.close().await.unwrap();
    });
}

/// 16 tasks insert 8 lines each into one file through the tool; an insert the tool reports
/// as lost to concurrent edits is sent again, as a model would. Every line is there exactly
/// once.
async fn sixteen_tasks_insert_lines(memory: ScopedMemory) {
    const TASKS: usize = 16;
    const LINES: usize = 8;
    create(&memory, "/memories/log.md", "").await;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let memory = memory.clone();
        tasks.push(tokio::spawn(async move {
            let mut retries = 0;
            for line in 0..LINES {
                let input = json!({"command": "insert", "path": "/memories/log.md",
                                   "insert_line": 0, "insert_text": format!("task {task} line {line}\n")});
                loop {
                    match memory_tool::run(&memory, &input).await {
                        Ok(text) => {
                            assert_eq!(text, "The file /memories/log.md has been edited.");
                            break;
                        }
                        Err(err) if err.kind() == ToolErrorKind::Conflict => retries += 1,
                        Err(err) => panic!("insert failed: {err}"),
                    }
                }
            }
            retries
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let content = records(&memory).await.remove("log.md").unwrap();
    let mut lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), TASKS * LINES, "no insert lost or doubled:\n{content}");
    lines.sort_unstable();
    let mut expected: Vec<String> = (0..TASKS)
        .flat_map(|task| (0..LINES).map(move |line| format!("task {task} line {line}")))
        .collect();
    expected.sort_unstable();
    assert_eq!(lines, expected);
    // Each task's lines are in its own order (each insert goes on top).
    for task in 0..TASKS {
        let mine: Vec<&str> =
            content.lines().filter(|l| l.starts_with(&format!("task {task} "))).collect();
        let newest_first: Vec<String> =
            (0..LINES).rev().map(|line| format!("task {task} line {line}")).collect();
        assert_eq!(mine, newest_first);
    }
}

#[test]
fn sixteen_tasks_inserting_into_one_file_lose_no_line_in_memory() {
    runtime().block_on(async { sixteen_tasks_insert_lines(in_memory().await).await });
}

#[test]
fn sixteen_tasks_inserting_into_one_file_lose_no_line_on_sqlite() {
    on_file("race.db", |path| async move {
        let store = started_on(&path).await;
        sixteen_tasks_insert_lines(ScopedMemory::new(store.clone(), scope())).await;
        store.close().await.unwrap();
    });
}

/// Two SQLite stores on one file (two replicas) race `str_replace` edits of distinct tokens
/// in one file: every replacement lands.
#[test]
fn replicas_racing_str_replace_lose_no_edit() {
    const TOKENS: usize = 24;
    on_file("replicas.db", |path| async move {
        let stores = [started_on(&path).await, started_on(&path).await];
        let memories: Vec<ScopedMemory> = stores
            .iter()
            .map(|s| ScopedMemory::new(s.clone() as Arc<dyn MemoryStore>, scope()))
            .collect();
        let text: String = (0..TOKENS).map(|i| format!("[todo {i:02}]\n")).collect();
        create(&memories[0], "/memories/list.md", &text).await;
        let mut tasks = Vec::new();
        for i in 0..TOKENS {
            let memory = memories[i % 2].clone();
            tasks.push(tokio::spawn(async move {
                let (todo, done) = (format!("[todo {i:02}]"), format!("[done {i:02}]"));
                let input = str_replace("/memories/list.md", &todo, &done);
                loop {
                    match memory_tool::run(&memory, &input).await {
                        Ok(_) => return,
                        Err(err) if err.kind() == ToolErrorKind::Conflict => {}
                        Err(err) => panic!("str_replace failed: {err}"),
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let expected: String = (0..TOKENS).map(|i| format!("[done {i:02}]\n")).collect();
        assert_eq!(records(&memories[1]).await["list.md"], expected);
        for store in &stores {
            store.close().await.unwrap();
        }
    });
}

/// A file renamed while another task keeps editing it: every edit that was acknowledged is
/// in the file at the end, at the old path or the new one, and the file exists once.
#[test]
fn a_rename_racing_edits_loses_no_acknowledged_edit() {
    runtime().block_on(async {
        for round in 0..20 {
            let memory = in_memory().await;
            create(&memory, "/memories/a.md", "").await;
            let editor = tokio::spawn({
                let memory = memory.clone();
                async move {
                    let mut acknowledged = Vec::new();
                    for n in 0..30 {
                        let input = json!({"command": "insert", "path": "/memories/a.md",
                                           "insert_line": 0, "insert_text": format!("edit {n}")});
                        match memory_tool::run(&memory, &input).await {
                            Ok(_) => acknowledged.push(format!("edit {n}")),
                            Err(err) if err.kind() == ToolErrorKind::InvalidArguments => break,
                            Err(err) if err.kind() == ToolErrorKind::Conflict => {}
                            Err(err) => panic!("edit failed: {err}"),
                        }
                        tokio::task::yield_now().await;
                    }
                    acknowledged
                }
            });
            tokio::task::yield_now().await;
            let rename = json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"});
            let renamed = memory_tool::run(&memory, &rename).await;
            let acknowledged = editor.await.unwrap();
            let files = records(&memory).await;
            match renamed {
                Ok(_) => assert_eq!(files.keys().collect::<Vec<_>>(), ["b.md"], "round {round}"),
                Err(err) => assert_eq!(err.kind(), ToolErrorKind::Conflict, "round {round}: {err}"),
            }
            let all: String = files.values().cloned().collect();
            for edit in &acknowledged {
                assert!(all.lines().any(|l| l == edit), "round {round}: {edit} lost; files {files:?}");
            }
        }
    });
}

#[test]
fn the_definition_declares_the_six_commands() {
    let tool = memory_tool::definition();
    assert_eq!(tool.name, memory_tool::NAME);
    let commands = &tool.input_schema["properties"]["command"]["enum"];
    assert_eq!(commands, &json!(["view", "create", "str_replace", "insert", "delete", "rename"]));
    let arguments: Vec<&str> = tool.arguments().collect();
    for name in [
        "path",
        "view_range",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "insert_text",
        "old_path",
        "new_path",
    ] {
        assert!(arguments.contains(&name), "{name}");
    }
}

/// A store's quota reaches the model as a full memory, with how to free space; nothing is
/// written, and deleting a file makes room.
#[tokio::test]
async fn a_full_memory_says_so_and_how_to_free_space() {
    let store = Arc::new(InMemoryStore::builder().max_records_per_user(1).build().unwrap());
    store.start().await.unwrap();
    let memory = ScopedMemory::new(store, scope());
    create(&memory, "/memories/a.md", "first").await;
    let err = fail(
        &memory,
        json!({"command": "create", "path": "/memories/b.md", "file_text": "second"}),
    )
    .await;
    assert_eq!(err.kind(), ToolErrorKind::MemoryFull, "{err}");
    assert!(err.message().contains("The memory is full") && err.message().contains("delete"));
    assert_eq!(records(&memory).await.len(), 1, "nothing was written");
    ok(&memory, json!({"command": "delete", "path": "/memories/a.md"})).await;
    create(&memory, "/memories/b.md", "second").await;
}

/// A store that records the name of every operation it forwards to a real store, so a test
/// can say which operations a command ran.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn MemoryStore>,
    calls: Mutex<Vec<&'static str>>,
}

impl Recording {
    fn new(inner: Arc<dyn MemoryStore>) -> Self {
        Self { inner, calls: Mutex::new(Vec::new()) }
    }

    fn note(&self, name: &'static str) {
        self.calls.lock().unwrap().push(name);
    }

    /// The operations since the last call, and forgets them.
    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

// `start` and `close` forwarded; every other operation noted by name, then forwarded.
agent_memory::forward_store!(Recording, inner, note);

/// `view` of a directory of large files reads keys and sizes only (`list_keys`), never a
/// whole record: one `get` (is the path a file?) and pages of keys, on SQLite, whose sizes
/// come from the row headers.
#[tokio::test]
async fn viewing_a_directory_reads_keys_and_sizes_never_contents() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(SqliteMemoryStore::new(dir.path().join("memories.db")));
    let store = Arc::new(Recording::new(sqlite));
    store.start().await.unwrap();
    let memory = ScopedMemory::new(store.clone(), scope());
    let large = "x".repeat(60 * 1024);
    for i in 0..250 {
        memory.put(&format!("big/f{i:03}.md"), large.clone()).await.unwrap();
    }
    memory.put("big/sub/small.md", "é").await.unwrap();
    store.take();

    let listing = view(&memory, "/memories/big").await;
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 1 + 1 + 250 + 2, "{}", &listing[..200]);
    assert!(lines.contains(&"60K\t/memories/big/f000.md"), "{listing}");
    assert!(lines.contains(&"2B\t/memories/big/sub/small.md"), "{listing}");
    let calls = store.take();
    assert_eq!(calls.iter().filter(|c| **c == "get").count(), 1, "{calls:?}");
    assert!(calls.iter().all(|c| ["get", "list_keys"].contains(c)), "{calls:?}");
    assert_eq!(calls.len(), 1 + 1 + 3, "a lookup, a directory check, three pages: {calls:?}");
}

/// A rename that runs into the user's quota says the memory is full (with how to free space
/// and that the same rename finishes it), not that the store is unavailable: for a file, for
/// a directory whose journal does not fit, and for one that fills up halfway.
#[tokio::test]
async fn a_rename_at_quota_says_the_memory_is_full() {
    let store = Arc::new(InMemoryStore::builder().max_records_per_user(3).build().unwrap());
    store.start().await.unwrap();
    let memory = ScopedMemory::new(store, scope());
    for path in ["/memories/a.md", "/memories/dir/x.md", "/memories/dir/y.md"] {
        create(&memory, path, "text").await;
    }
    for (old, new) in [("/memories/a.md", "/memories/b.md"), ("/memories/dir", "/memories/moved")] {
        let err =
            fail(&memory, json!({"command": "rename", "old_path": old, "new_path": new})).await;
        assert_eq!(err.kind(), ToolErrorKind::MemoryFull, "{err}");
        assert!(err.message().starts_with("The memory is full"), "{err}");
        assert!(err.message().contains("Nothing was moved"), "{err}");
        assert!(err.message().contains("run the same rename again"), "{err}");
        assert!(!err.message().contains("unavailable"), "{err}");
    }
    assert_eq!(records(&memory).await.len(), 3, "nothing moved, no journal left");

    // Room in bytes for the journal and a copy of the small file, not of the large one: the
    // first file moves, the second does not fit until another file is deleted.
    let files = [("dir/x.md", 10), ("dir/y.md", 2_000), ("other.md", 3_000)];
    let held: u64 = files
        .iter()
        .map(|(key, len)| {
            let (metadata, source) = (serde_json::Map::new(), agent_memory::Source::default());
            agent_memory::quota::record_bytes(key, &"t".repeat(*len), &metadata, &source)
        })
        .sum();
    let quotas = agent_memory::Quotas::default().max_bytes_per_user(held + 1_000);
    let store = Arc::new(InMemoryStore::builder().quotas(quotas).build().unwrap());
    store.start().await.unwrap();
    let memory = ScopedMemory::new(store, scope());
    for (key, len) in files {
        create(&memory, &format!("/memories/{key}"), &"t".repeat(len)).await;
    }
    let rename =
        json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/moved"});
    let err = fail(&memory, rename.clone()).await;
    assert_eq!(err.kind(), ToolErrorKind::MemoryFull, "{err}");
    assert!(err.message().contains("1 file was moved"), "{err}");
    ok(&memory, json!({"command": "delete", "path": "/memories/other.md"})).await;
    assert_eq!(ok(&memory, rename).await, "Successfully renamed /memories/dir to /memories/moved");
}
