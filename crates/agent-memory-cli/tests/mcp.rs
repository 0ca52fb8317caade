//! End-to-end tests of `agent-memory mcp`: the built binary over real stdio pipes.
//!
//! The main scenario is driven by an independent client, the official MCP Python SDK
//! (`tests/mcp_client.py`), run with the interpreter named by `AGENT_MEMORY_TEST_PYTHON`
//! (`scripts/test` creates that virtual environment and sets it). The other tests speak raw
//! JSON-RPC to check the process itself: stdout carries only protocol messages and the server
//! exits cleanly when the client closes stdin.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

mod support;

const BINARY: &str = env!("CARGO_BIN_EXE_agent-memory");

fn python() -> PathBuf {
    agent_memory_testkit::util::python(
        "The MCP end-to-end test needs a Python with the official MCP SDK",
        "create one with\n  python3 -m venv ~/.cache/agent-memory/ci-venv && \
         ~/.cache/agent-memory/ci-venv/bin/pip install 'mcp>=1.2,<2'\nand run\n  export \
         AGENT_MEMORY_TEST_PYTHON=~/.cache/agent-memory/ci-venv/bin/python\n(scripts/test does \
         both).",
    )
}

#[test]
fn official_python_client_drives_the_server_over_stdio() {
    let python = python();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("mcp.db").display());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("mcp_client.py");
    let home = dir.path().join("home");

    let mut cmd = Command::new(&python);
    cmd.arg(&script).arg(BINARY).arg(&store).arg("e2e-app");
    cmd.env("HOME", &home).env("PATH", std::env::var_os("PATH").unwrap_or_default());
    support::run_client(&mut cmd, "the MCP client scenario", "mcp end-to-end scenario passed");
}

/// Reads stdout lines on a thread, so a test can wait for them with a timeout.
fn line_reader(child: &mut Child) -> mpsc::Receiver<String> {
    support::lines_of(child.stdout.take().expect("piped stdout"))
}

/// A stdio server the test talks to: its stdin, its stdout lines, and its stderr, read to the
/// end on a thread.
struct StdioServer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl StdioServer {
    /// Starts `cmd` with its three streams piped here.
    fn start(cmd: &mut Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take().expect("piped stdin");
        let stderr = child.stderr.take().expect("piped stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            text
        });
        let lines = line_reader(&mut child);
        Self { child, stdin, lines, stderr }
    }
}

/// A stdio server on an in-memory store, as `raw-user` of `raw-app`, with `env` set.
fn raw_server(home: &Path, env: &[(&str, &str)]) -> StdioServer {
    let mut cmd = support::server_command(home);
    cmd.args(["--store", "memory:", "--app", "raw-app", "--user", "raw-user", "mcp"]);
    StdioServer::start(cmd.envs(env.iter().copied()))
}

fn next_message(lines: &mpsc::Receiver<String>) -> Value {
    let line = lines.recv_timeout(Duration::from_secs(30)).expect("a response within 30 s");
    serde_json::from_str(&line)
        .unwrap_or_else(|err| panic!("stdout line is not JSON ({err}): {line}"))
}

fn send(stdin: &mut impl Write, message: &Value) {
    writeln!(stdin, "{message}").expect("write to server");
    stdin.flush().expect("flush");
}

/// The initialize handshake (request id 1) as a client named `client_name`.
fn initialize(stdin: &mut impl Write, lines: &mpsc::Receiver<String>, client_name: &str) {
    send(
        stdin,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": client_name, "version": "0"}
        }}),
    );
    let init = next_message(lines);
    assert_eq!(init["id"], 1, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "agent-memory", "{init}");
    assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
    send(stdin, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}

#[test]
fn stdout_is_only_protocol_and_closing_stdin_ends_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Verbose logging must still stay off stdout.
    let verbose = [("RUST_LOG", "trace"), ("AGENT_MEMORY_LOG", "trace")];
    let StdioServer { mut child, mut stdin, lines, stderr } = raw_server(dir.path(), &verbose);

    initialize(&mut stdin, &lines, "raw-test");
    send(&mut stdin, &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = next_message(&lines);
    assert_eq!(listed["id"], 2, "{listed}");
    let mut names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools array")
        .iter()
        .map(|t| t["name"].as_str().expect("tool name"))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["memory_delete", "memory_get", "memory_list", "memory_save", "memory_search"]
    );

    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "memory_save",
            "arguments": {"key": "k", "content": "v", "user_id": "someone-else"}
        }}),
    );
    let refused = next_message(&lines);
    assert_eq!(refused["id"], 3, "{refused}");
    assert_eq!(refused["result"]["isError"], true, "a tool error, readable by the model");
    let text = refused["result"]["content"][0]["text"].as_str().expect("error text");
    assert!(text.contains("`user_id`") && text.contains("fixed by the application"), "{text}");

    drop(stdin);
    let status = support::wait_with_timeout(&mut child, Duration::from_secs(20));
    let stderr = stderr.join().unwrap_or_default();
    let status =
        status.unwrap_or_else(|| panic!("server still running after stdin closed\n{stderr}"));
    assert!(status.success(), "server exit {status}; stderr:\n{stderr}");
    // Whatever else reached stdout is JSON too (next_message panics otherwise).
    while let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) {
        let parsed: Result<Value, _> = serde_json::from_str(&line);
        assert!(parsed.is_ok(), "non-protocol output on stdout: {line}");
    }
}

#[test]
fn an_unknown_tools_name_never_reaches_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let StdioServer { mut child, mut stdin, lines, stderr } =
        raw_server(dir.path(), &[("AGENT_MEMORY_LOG", "info")]);
    initialize(&mut stdin, &lines, "raw-test");
    // A name a client could fill with anything: log injection, personal data.
    let chosen = "client-chosen-tool-name-5f1e\nFAKE LOG LINE";
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": chosen, "arguments": {}
        }}),
    );
    let refused = next_message(&lines);
    assert_eq!(refused["id"], 2, "{refused}");
    let message = refused["error"]["message"].as_str().expect("a protocol error");
    assert!(message.contains("unknown tool") && message.contains("memory_get"), "{message}");
    drop(stdin);
    let status = support::wait_with_timeout(&mut child, Duration::from_secs(20));
    let stderr = stderr.join().unwrap_or_default();
    assert!(status.is_some_and(|status| status.success()), "{stderr}");
    assert!(!stderr.contains("client-chosen-tool-name"), "the name reached the log:\n{stderr}");
    assert!(!stderr.contains("FAKE LOG LINE"), "{stderr}");
}

#[test]
fn writes_record_the_session_and_the_clients_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("source.db").display());
    let scope = ["--store", store.as_str(), "--app", "source-app", "--user", "source-user"];
    let StdioServer { mut child, mut stdin, lines, .. } =
        StdioServer::start(support::server_command(dir.path()).args(scope).arg("mcp"));
    // The control character is dropped from the recorded name.
    initialize(&mut stdin, &lines, "note\u{7}-taker");
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory_save", "arguments": {"key": "k", "content": "v"}
        }}),
    );
    let saved = next_message(&lines);
    assert_eq!(saved["id"], 2, "{saved}");
    assert_ne!(saved["result"]["isError"], true, "{saved}");
    drop(stdin);
    let status =
        support::wait_with_timeout(&mut child, Duration::from_secs(20)).expect("server exits");
    assert!(status.success(), "exit {status}");

    let read =
        support::server_command(dir.path()).args(scope).args(["--json", "get", "k"]).output();
    let read = read.expect("run the CLI");
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    let record: Value = serde_json::from_slice(&read.stdout).expect("one JSON record");
    assert_eq!(record["source"]["agent"], "note-taker", "{record}");
    let session = record["source"]["session_id"].as_str().unwrap_or_default();
    assert_eq!(session.len(), 32, "a simple-format UUID: {record}");
}

#[test]
fn closing_stdin_before_initializing_is_a_clean_exit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = support::server_command(dir.path())
        .args(["--store", "memory:", "--app", "a", "--user", "u", "mcp", "--tools", "facts"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    drop(child.stdin.take());
    let lines = line_reader(&mut child);
    let status =
        support::wait_with_timeout(&mut child, Duration::from_secs(20)).expect("server exits");
    assert!(status.success(), "exit {status}");
    assert!(lines.recv_timeout(Duration::from_millis(200)).is_err(), "nothing on stdout");
}

#[test]
fn the_server_refuses_to_start_without_app_and_user() {
    let dir = tempfile::tempdir().expect("temp dir");
    for args in [
        vec!["--store", "memory:", "mcp"],
        vec!["--store", "memory:", "--app", "a", "mcp"],
        vec!["--store", "memory:", "--user", "u", "mcp"],
    ] {
        let mut server = StdioServer::start(support::server_command(dir.path()).args(&args));
        let status = support::wait_with_timeout(&mut server.child, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{args:?}: started serving without a full scope"));
        assert!(!status.success(), "{args:?} must fail");
        assert!(
            server.lines.recv_timeout(Duration::from_millis(200)).is_err(),
            "{args:?}: stdout used"
        );
    }
}
