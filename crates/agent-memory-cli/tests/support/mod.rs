//! What the binary's test files share: a temp SQLite store, commands with a clean environment,
//! and readers for the JSON Lines and one-line errors the CLI prints.
// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

pub const OK: i32 = 0;
pub const NOT_FOUND: i32 = 1;
pub const INVALID: i32 = 2;
pub const CONFLICT: i32 = 3;
pub const FAILURE: i32 = 4;
pub const QUOTA_EXCEEDED: i32 = 5;

/// The variables removed from every command the tests run, so no test can reach the
/// developer's own memories or change how the binary logs.
pub const CLEARED_ENV: [&str; 6] = [
    "AGENT_MEMORY_STORE",
    "AGENT_MEMORY_APP",
    "AGENT_MEMORY_USER",
    "AGENT_MEMORY_NAMESPACE",
    "AGENT_MEMORY_LOG",
    "RUST_LOG",
];

/// A temp directory holding the SQLite store `m.db` and a home for the binary.
pub struct Fixture {
    pub dir: TempDir,
    pub store: String,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = format!("sqlite:{}", dir.path().join("m.db").display());
        Self { dir, store }
    }

    /// A second store in the same temp directory.
    pub fn other_store(&self, name: &str) -> String {
        format!("sqlite:{}", self.dir.path().join(name).display())
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The binary with a clean environment and no global options.
    pub fn bare(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-memory"));
        for var in CLEARED_ENV {
            cmd.env_remove(var);
        }
        let home = self.dir.path().join("home");
        cmd.env("HOME", &home).env("XDG_DATA_HOME", home.join("data"));
        cmd.timeout(std::time::Duration::from_secs(60));
        cmd
    }

    /// The binary on this fixture's store, with no scope.
    pub fn with_store(&self) -> Command {
        let mut cmd = self.bare();
        cmd.args(["--store", &self.store]);
        cmd
    }

    /// The binary on this fixture's store, as application `app`, user `u1`.
    pub fn cmd(&self) -> Command {
        self.on(&self.store, "u1")
    }

    /// The binary on `store`, as application `app`, user `user`.
    pub fn on(&self, store: &str, user: &str) -> Command {
        let mut cmd = self.bare();
        cmd.args(["--store", store, "--app", "app", "--user", user]);
        cmd
    }

    pub fn put(&self, key: &str, content: &str) {
        self.cmd().args(["put", key, content]).assert().code(OK);
    }
}

/// Parses stdout as JSON Lines.
pub fn json_lines(output: &[u8]) -> Vec<Value> {
    std::str::from_utf8(output)
        .expect("stdout is UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each stdout line is JSON"))
        .collect()
}

/// Runs `cmd`, expects success, and parses its stdout as JSON Lines.
pub fn stdout_json(cmd: &mut Command) -> Vec<Value> {
    let output = cmd.output().expect("runs");
    assert_eq!(
        output.status.code(),
        Some(OK),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    json_lines(&output.stdout)
}

pub fn keys(records: &[Value]) -> Vec<&str> {
    records.iter().map(|r| r["key"].as_str().expect("key")).collect()
}

/// Exit `code`, nothing on stdout, and one line on stderr starting with `error: ` and
/// containing `contains`; `what` names the case in failure messages.
pub fn assert_one_line_error(cmd: &mut Command, code: i32, contains: &str, what: &str) {
    let output = cmd.output().expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{what}: stderr {stderr:?}");
    assert!(
        output.stdout.is_empty(),
        "{what}: stdout {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(stderr.lines().count(), 1, "{what}: one line expected, got {stderr:?}");
    assert!(stderr.starts_with("error: "), "{what}: {stderr:?}");
    assert!(stderr.contains(contains), "{what}: {stderr:?} should contain {contains:?}");
}
