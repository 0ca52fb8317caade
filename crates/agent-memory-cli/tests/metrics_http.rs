//! End-to-end: `agent-memory mcp --listen … --metrics` serves the store's metrics in
//! Prometheus's text format, beside `/mcp` or (with `--metrics-listen`) on an address of its
//! own, and `--log-format json` writes one JSON object per log line.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use support::Fixture;

const BINARY: &str = env!("CARGO_BIN_EXE_agent-memory");

/// A server started by a test, with its stderr lines on a channel.
struct Server {
    child: Child,
    addr: String,
    stderr: Receiver<String>,
}

impl Server {
    fn start(fx: &Fixture, extra: &[&str]) -> Self {
        let keys = fx.path("keys.jsonl");
        std::fs::write(&keys, "").unwrap();
        let store = format!("sqlite:{}", fx.path("metrics.db").display());
        let mut cmd = Command::new(BINARY);
        for var in support::CLEARED_ENV {
            cmd.env_remove(var);
        }
        let mut child = cmd
            .env("HOME", fx.path("home"))
            .env("AGENT_MEMORY_LOG", "info")
            .args(["--store", &store, "--app", "metrics", "--log-format", "json", "mcp"])
            .args(["--listen", "127.0.0.1:0", "--api-keys", keys.to_str().unwrap()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| panic!("no address: {seen:?}"));
            // With --log-format json, the line is an object like every other on stderr.
            let message = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|object| object["fields"]["message"].as_str().map(str::to_owned));
            if let Some(rest) =
                message.as_deref().and_then(|m| m.split("listening on http://").nth(1))
            {
                break rest.trim_end_matches("/mcp").to_owned();
            }
            seen.push(line);
        };
        let (tx, stderr) = std::sync::mpsc::channel();
        for line in seen {
            tx.send(line).unwrap();
        }
        std::thread::spawn(move || {
            while let Ok(line) = rx.recv() {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, addr, stderr }
    }

    /// SIGTERM, then every stderr line.
    fn stop(mut self) -> Vec<String> {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
        assert!(self.child.wait().expect("wait").success(), "SIGTERM is a clean exit");
        let mut lines = Vec::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(5)) {
            lines.push(line);
        }
        lines
    }
}

/// `GET path` on `addr`: the status code and the body.
fn fetch(addr: &str, path: &str) -> (u16, String) {
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

/// A loopback address no one listens on right now.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// The duration histogram's series for SQLite `get`s that succeeded.
const GET_BUCKETS: &str = "db_client_operation_duration_seconds_bucket{db_system_name=\"sqlite\",db_operation_name=\"get\",outcome=\"ok\"";

#[test]
fn metrics_beside_mcp_show_the_store_operations() {
    let fx = Fixture::new();
    let server = Server::start(&fx, &["--metrics"]);
    // The health probe reads the store once: one `get`.
    assert_eq!(fetch(&server.addr, "/healthz").0, 200);
    let (status, body) = fetch(&server.addr, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(GET_BUCKETS), "{body}");
    assert!(body.contains("# TYPE db_client_operation_duration_seconds histogram"), "{body}");
    assert!(body.contains("# HELP db_client_operation_duration_seconds"), "{body}");
    let count = body
        .lines()
        .find(|line| {
            line.starts_with("db_client_operation_duration_seconds_count{")
                && line.contains("db_operation_name=\"get\"")
        })
        .expect("a count for get");
    assert!(count.ends_with(" 1"), "{count}");
    assert!(!body.contains("healthz"), "no id or key in the metrics: {body}");
    // The /mcp route still wants a credential; /metrics does not.
    assert_eq!(fetch(&server.addr, "/mcp").0, 401);

    let lines = server.stop();
    assert!(!lines.is_empty());
    for line in lines.iter().filter(|line| line.starts_with('{')) {
        let object: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
        assert!(object["level"].is_string() && object["fields"].is_object(), "{line}");
    }
    assert!(
        lines.iter().any(|line| line.starts_with('{') && line.contains("MCP server starting")),
        "{lines:?}"
    );
}

#[test]
fn healthz_reads_the_store_at_most_once_a_second() {
    let fx = Fixture::new();
    let server = Server::start(&fx, &["--metrics"]);
    for _ in 0..40 {
        assert_eq!(fetch(&server.addr, "/healthz").0, 200);
    }
    let (_, body) = fetch(&server.addr, "/metrics");
    let gets: u64 = body
        .lines()
        .find(|line| {
            line.starts_with("db_client_operation_duration_seconds_count{")
                && line.contains("db_operation_name=\"get\"")
        })
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .expect("a count for get");
    // 40 requests within a second or two: one read, two if they straddled a second.
    assert!((1..=3).contains(&gets), "{gets} store reads for 40 health checks");
    server.stop();
}

#[test]
fn metrics_listen_serves_them_on_their_own_address_only() {
    let fx = Fixture::new();
    let metrics = free_address();
    let server = Server::start(&fx, &["--metrics-listen", &metrics]);
    assert_eq!(fetch(&server.addr, "/healthz").0, 200);
    assert_eq!(fetch(&server.addr, "/metrics").0, 404, "not beside /mcp");
    let (status, body) = fetch(&metrics, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(GET_BUCKETS), "{body}");
    server.stop();
}

#[test]
fn metrics_options_need_listen() {
    let fx = Fixture::new();
    for args in [vec!["mcp", "--metrics"], vec!["mcp", "--metrics-listen", "127.0.0.1:9"]] {
        let out = fx.bare().args(["--app", "a", "--user", "u"]).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(support::INVALID), "{args:?}");
    }
}

#[test]
fn json_logs_show_operations_with_hashed_ids_only_when_asked_for() {
    let fx = Fixture::new();
    let run = |key: Option<&str>| {
        let mut cmd = fx.bare();
        cmd.env("AGENT_MEMORY_LOG", "agent_memory=info").args(["--log-format", "json"]);
        if let Some(key) = key {
            cmd.env("AGENT_MEMORY_ID_HASH_KEY", key);
        }
        let store = fx.store.clone();
        let out = cmd
            .args(["--store", &store, "--app", "app-secret", "--user", "user-secret"])
            .args(["put", "key-secret", "content-secret"])
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };

    let (code, stderr) = run(None);
    assert_eq!(code, Some(support::OK), "{stderr}");
    let lines: Vec<serde_json::Value> =
        stderr.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    let put = lines
        .iter()
        .find(|line| line["span"]["name"] == "put")
        .unwrap_or_else(|| panic!("a line for the put: {stderr}"));
    assert_eq!(put["span"]["db.system.name"], "sqlite");
    assert!(put["span"].get("agent_memory.user_id.hash").is_none(), "{put}");
    assert!(!stderr.contains("secret"), "{stderr}");

    let (code, stderr) = run(Some("a key of sixteen bytes or more"));
    assert_eq!(code, Some(support::OK), "{stderr}");
    assert!(stderr.contains("agent_memory.user_id.hash"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");

    let (code, stderr) = run(Some("short"));
    assert_eq!(code, Some(support::INVALID), "{stderr}");
    assert!(stderr.contains("AGENT_MEMORY_ID_HASH_KEY") && !stderr.contains("short"), "{stderr}");
}
