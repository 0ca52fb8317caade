//! What the binary's test files share: a temp SQLite store, commands with a clean environment,
//! readers for the JSON Lines and one-line errors the CLI prints, servers the binary runs on a
//! loopback port, and the runner of the end-to-end clients.
// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

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

/// Asserts that `output` is of a run that exited with `code`, showing its stderr when it did
/// not, and returns its stdout and its stderr as text.
pub fn exited(output: &Output, code: i32) -> (String, String) {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "stderr: {stderr}");
    (String::from_utf8_lossy(&output.stdout).into_owned(), stderr)
}

/// Runs `cmd`, expects success, and parses its stdout as JSON Lines.
pub fn stdout_json(cmd: &mut Command) -> Vec<Value> {
    let output = cmd.output().expect("runs");
    exited(&output, OK);
    json_lines(&output.stdout)
}

/// The records of an export, without what the target store assigns anew.
pub fn comparable(export: &[Value]) -> Vec<Value> {
    export
        .iter()
        .map(|record| {
            let mut record = record.clone();
            let object = record.as_object_mut().expect("object");
            for assigned in ["revision", "created_at", "updated_at"] {
                assert!(object.remove(assigned).is_some(), "export has {assigned}");
            }
            record
        })
        .collect()
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

/// The binary with no `AGENT_MEMORY_*` variables and a private home, so no test can reach the
/// developer's own memories.
pub fn server_command(home: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agent-memory"));
    for var in CLEARED_ENV {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home).env("XDG_DATA_HOME", home.join("data"));
    cmd
}

/// A server the binary runs for a test: its address, read from the stderr line that says where
/// it listens, the stderr lines before that one, and every later one on a channel.
pub struct Listening {
    pub child: Child,
    pub addr: String,
    pub before: Vec<String>,
    pub stderr: Receiver<String>,
}

impl Listening {
    /// Spawns `cmd` with stdin and stdout closed and stderr read here, and waits up to 30 s for
    /// the line whose `message` (the line itself, or what a structured log line says) names
    /// the address.
    pub fn start(cmd: &mut std::process::Command, message: fn(&str) -> Option<String>) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let rx = lines_of(child.stderr.take().expect("piped stderr"));
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| panic!("no address: {seen:?}"));
            if let Some(rest) =
                message(&line).as_deref().and_then(|m| m.split("listening on http://").nth(1))
            {
                break rest.trim_end_matches("/mcp").to_owned();
            }
            seen.push(line);
        };
        Self { child, addr, before: seen, stderr: rx }
    }

    /// The status code of `GET path`.
    pub fn status(&self, path: &str) -> u16 {
        http_get(&self.addr, path).0
    }

    /// SIGTERM, then the exit status.
    pub fn stop(mut self) -> ExitStatus {
        self.terminate()
    }

    /// SIGTERM, then the exit status and every stderr line (those read within 5 s of the exit).
    pub fn stop_and_read(mut self) -> (ExitStatus, Vec<String>) {
        let status = self.terminate();
        let mut lines = std::mem::take(&mut self.before);
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(5)) {
            lines.push(line);
        }
        (status, lines)
    }

    fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
        self.child.wait().expect("wait")
    }
}

/// The lines of `stream`, read on a thread until it ends (or fails) or the receiver is gone.
pub fn lines_of(stream: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// `GET path` on `addr`: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_owned();
    (status, body)
}

/// Waits up to `timeout` for `child` to exit; kills it and returns `None` when it does not.
pub fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait().expect("wait for child") {
            Some(status) => return Some(status),
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Runs the end-to-end client `cmd` (`what` names it in failures) for at most 300 s, reading
/// its output on threads so a chatty client never blocks on a full pipe, and panics with that
/// output unless it exits successfully having printed `passed`; returns its stdout.
pub fn run_client(cmd: &mut std::process::Command, what: &str, passed: &str) -> String {
    let mut child = agent_memory_testkit::util::spawn_python(
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()),
    );
    let read_all = |mut stream: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stream.read_to_string(&mut text);
            text
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = read_all(Box::new(child.stderr.take().expect("piped stderr")));
    let status = wait_with_timeout(&mut child, Duration::from_secs(300));
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let Some(status) = status else {
        panic!("{what} timed out\nstdout:\n{stdout}\nstderr:\n{stderr}");
    };
    assert!(status.success(), "{what} failed ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains(passed), "stdout:\n{stdout}");
    stdout
}
