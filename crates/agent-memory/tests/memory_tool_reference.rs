//! The memory tool against its reference: random command sequences run through the Anthropic
//! SDK's `BetaLocalFilesystemMemoryTool` and through `agent_memory::memory_tool` on a SQLite
//! store, comparing every result text and every file (`tests/memory_tool_reference.py` drives
//! both and compares).
//!
//! The Python comes from `AGENT_MEMORY_TEST_PYTHON` and needs the `anthropic` package
//! (`scripts/test` installs both). `AGENT_MEMORY_DIFF_SEED` replays a run (a failure prints its
//! seed), `AGENT_MEMORY_DIFF_ONLY` one sequence of it, and `AGENT_MEMORY_DIFF_SEQUENCES` sets
//! how many sequences run (300 by default).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use agent_memory::sqlite::SqliteMemoryStore;
use agent_memory::{memory_tool, MemoryScope, MemoryStore, PageRequest, ScopedMemory};
use serde_json::{json, Value};

/// The differences the script may tolerate; each must be documented, with its number, in the
/// module docs and in the guide.
const TOLERATED: [&str; 3] = ["D1", "D2", "D3"];

fn python() -> PathBuf {
    agent_memory_testkit::util::python(
        "The memory tool's differential test runs the Anthropic SDK's reference implementation",
        "create a Python environment with\n  python3 -m venv ~/.cache/agent-memory/ci-venv && \
         ~/.cache/agent-memory/ci-venv/bin/pip install 'anthropic>=2.15,<3'\nand run\n  \
         export AGENT_MEMORY_TEST_PYTHON=~/.cache/agent-memory/ci-venv/bin/python\n\
         (scripts/test does both).",
    )
}

fn env_or(name: &str, default: String) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or(default)
}

/// Every record of the scope, key to content: what the files are, read past the tool.
async fn files(memory: &ScopedMemory) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    let mut page = PageRequest::new(100);
    loop {
        let result = memory.list(page.clone()).await.expect("list the scope");
        all.extend(result.items.into_iter().map(|r| (r.key, r.content)));
        match result.next_cursor {
            Some(cursor) => page = page.after(cursor),
            None => return all,
        }
    }
}

#[test]
fn random_command_sequences_match_the_reference_implementation() {
    let seed = env_or("AGENT_MEMORY_DIFF_SEED", uuid::Uuid::new_v4().simple().to_string());
    let sequences = env_or("AGENT_MEMORY_DIFF_SEQUENCES", "300".to_owned());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/memory_tool_reference.py");
    let python = python();
    eprintln!("memory tool differential test: seed {seed}, {sequences} sequences");

    let dir = tempfile::tempdir().expect("a temporary folder");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = Arc::new(SqliteMemoryStore::new(dir.path().join("memory-tool.db")));
    runtime.block_on(store.start()).expect("the store starts");

    let mut child = agent_memory_testkit::util::spawn_python(
        Command::new(&python)
            .arg(&script)
            .arg(&seed)
            .arg(&sequences)
            .env("TMPDIR", dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut to_script = child.stdin.take().expect("piped stdin");
    let from_script = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut stderr = child.stderr.take().expect("piped stderr");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });

    let mut memory: Option<ScopedMemory> = None;
    let mut summary: Option<Value> = None;
    for line in from_script.lines() {
        let Ok(line) = line else { break };
        let request: Value = serde_json::from_str(&line).unwrap_or_else(|err| {
            panic!("the script wrote a line that is not JSON ({err}): {line}")
        });
        let reply = match request["op"].as_str() {
            Some("begin") => {
                let user = format!("sequence-{}", request["sequence"]);
                let scope = MemoryScope::new("memory-tool-reference", user).unwrap();
                memory = Some(ScopedMemory::new(store.clone(), scope));
                json!({})
            }
            Some("run") => {
                let memory = memory.as_ref().expect("a sequence began");
                match runtime.block_on(memory_tool::run(memory, &request["input"])) {
                    Ok(text) => json!({"ok": true, "text": text, "kind": null}),
                    Err(err) => json!({"ok": false, "text": err.message(), "kind": err.kind()}),
                }
            }
            Some("dump") => {
                let memory = memory.as_ref().expect("a sequence began");
                json!({"files": runtime.block_on(files(memory))})
            }
            Some("done") => {
                summary = Some(request);
                break;
            }
            _ => panic!("unknown request from the script: {line}"),
        };
        if writeln!(to_script, "{reply}").and_then(|()| to_script.flush()).is_err() {
            break;
        }
    }
    drop(to_script);
    let status = child.wait().expect("wait for the script");
    let stderr = stderr.join().unwrap_or_default();
    assert!(status.success(), "the differential test failed (seed {seed}):\n{stderr}");
    let summary =
        summary.unwrap_or_else(|| panic!("the script ended without a summary:\n{stderr}"));
    eprintln!("memory tool differential test: {summary}");
    if std::env::var_os("AGENT_MEMORY_DIFF_ONLY").is_none() {
        let expected: u64 = sequences.parse().expect("a number of sequences");
        assert_eq!(summary["sequences"], expected, "every sequence ran");
        assert!(summary["commands"].as_u64().unwrap_or(0) >= expected * 5, "{summary}");
    }
    runtime.block_on(store.close()).expect("the store closes");

    // Every difference the script tolerates is documented, with its number, in both places.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for doc in [root.join("src/memory_tool/docs.md"), root.join("../../docs/memory-tool.md")] {
        let text =
            std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        for id in TOLERATED {
            assert!(
                text.contains(&format!("| {id} |")),
                "{} does not document {id}",
                doc.display()
            );
        }
    }
    let script_text = std::fs::read_to_string(&script).expect("the script");
    for id in TOLERATED {
        assert!(script_text.contains(&format!("\"{id}\"")), "the script counts {id}");
    }
}
